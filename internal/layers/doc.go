// Package layers holds no code: its test checks the import rules the
// README's architecture section states, so a change that breaks them fails
// here instead of in review.
package layers
