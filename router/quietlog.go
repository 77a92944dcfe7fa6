package router

import (
	"fmt"

	"github.com/ocfw/ocfw/store"
)

// quietf records a repeated line among the events (`ocf net`) and in the
// card's log (Config.QuietLog), but not on the console; without a
// QuietLog it is logf.
func (r *Router) quietf(format string, args ...any) {
	if r.cfg.QuietLog == nil {
		r.logf(format, args...)
		return
	}
	line := store.Printable(fmt.Sprintf(format, args...))
	r.addEvent(line)
	r.cfg.QuietLog("%s", line)
}
