// Package layers holds no code: its test checks the import rules
// docs/architecture.md states, and that the document names every
// package, so a change that breaks them fails here instead of in review.
package layers
