package main

import (
	"context"
	"strings"
)

type buildResult struct{}
type bootResult struct{}

func runBuild(ctx context.Context, r *runner) error { return nil }
func runBoot(ctx context.Context, r *runner) error  { return nil }
func buildTable(b *strings.Builder, x *buildResult) {}
func bootTable(b *strings.Builder, x *bootResult)   {}
