package router

// Tunnels is the tunnels' part of Status (nil without tunnels), read
// without the rest: the boot follows it until the IKEv2 tunnels settle
// and keeps it in the boot's report.
func (r *Router) Tunnels() []TunnelState {
	r.svc.mu.Lock()
	ts := r.svc.tunnels
	r.svc.mu.Unlock()
	if ts == nil {
		return nil
	}
	r.watchIKELocked(ts) // states as of now, as in Status
	return ts.status(r.driverOf)
}
