// Command kubelet-bin is a multi-call binary holding the upstream kubelet and kube-proxy,
// built unchanged from the same pinned k8s.io/kubernetes module as scripts/k8s-bin. It is
// a separate binary (own go.mod, own cache key) so that the control plane used by
// `make test` never rebuilds because of the kubelet node kind. Select the component by
// argv[0] (symlink) or by the first argument.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	_ "time/tzdata"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

func main() {
	name, args := filepath.Base(os.Args[0]), os.Args[1:]
	if name == "kubelet-bin" {
		if len(args) == 0 {
			fmt.Fprintln(os.Stderr, "usage: kubelet-bin kubelet|kube-proxy [flags]")
			os.Exit(2)
		}
		name, args = args[0], args[1:]
	}
	var cmd *cobra.Command
	switch name {
	case "kubelet":
		cmd = kubelet.NewKubeletCommand(context.Background())
	case "kube-proxy":
		cmd = proxy.NewProxyCommand()
	default:
		fmt.Fprintf(os.Stderr, "kubelet-bin: unknown component %q\n", name)
		os.Exit(2)
	}
	cmd.SetArgs(args)
	os.Exit(cli.Run(cmd))
}
