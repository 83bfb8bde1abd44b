//go:build tools

// Package tools pins containerd's commands for scripts/build-kubelet.sh. containerd's own
// go.mod has exclude directives, so `go install pkg@version` refuses it; this module requires
// it at the pinned version and carries the same excludes.
package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
)
