package firmware

import (
	"context"
	"errors"

	"github.com/ocfw/ocfw/boards"
)

func buildRedBoot(ctx context.Context, plan *boards.Plan, in Input, opts ImageOptions, m *Manifest) (*Manifest, error) {
	return nil, errors.New("todo")
}
