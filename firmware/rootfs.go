package firmware

import (
	"context"
	"errors"

	"github.com/ocfw/ocfw/plan"
	"github.com/ocfw/ocfw/rootfs"
)

// BuildImage lays out the image for plan from the rootfs step's result:
// its kernel, its initramfs and the sha256 of everything that went in.
func BuildImage(ctx context.Context, pl *plan.Plan, r *rootfs.Result, opts ImageOptions) (*Manifest, error) {
	if r == nil || r.Kernel == nil {
		return nil, errors.New("firmware: no rootfs result (kernel and initramfs)")
	}
	in := Input{Kernel: r.Kernel.Image, KernelVersion: r.Kernel.Version, Initramfs: r.Initramfs, Inputs: map[string]string{}}
	for k, v := range r.Inputs {
		in.Inputs[k] = v
	}
	if r.Kernel.SHA256 != "" {
		in.Inputs["kernel-source"] = r.Kernel.SHA256
	}
	return Build(ctx, pl, in, opts)
}
