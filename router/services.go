package router

import "context"

// startServices starts the firewall and the services the site asks for.
func (r *Router) startServices(ctx context.Context) []error { return nil }

// wanChanged tells the services the WAN's address or resolvers changed.
func (r *Router) wanChanged() {}

// serviceStatus adds the services' state to st.
func (r *Router) serviceStatus(st *Status) {}
