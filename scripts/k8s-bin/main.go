// Command k8s-bin is a multi-call binary holding the upstream Kubernetes control-plane
// components, etcd and kubectl, built unchanged from the pinned upstream Go modules.
// Exactly one component runs per process (upstream installs process-global signal
// handlers and registries). Select it by argv[0] (symlink) or by the first argument.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	_ "time/tzdata"

	"github.com/spf13/cobra"
	"go.etcd.io/etcd/server/v3/etcdmain"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	kcm "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	name, args := filepath.Base(os.Args[0]), os.Args[1:]
	if name == "k8s-bin" {
		if len(args) == 0 {
			fmt.Fprintln(os.Stderr, "usage: k8s-bin etcd|kube-apiserver|kube-controller-manager|kube-scheduler|kubectl [flags]")
			os.Exit(2)
		}
		name, args = args[0], args[1:]
	}
	var cmd *cobra.Command
	switch name {
	case "etcd":
		etcdmain.Main(append([]string{"etcd"}, args...))
		return
	case "kube-apiserver":
		cmd = apiserver.NewAPIServerCommand()
	case "kube-controller-manager":
		cmd = kcm.NewControllerManagerCommand()
	case "kube-scheduler":
		cmd = scheduler.NewSchedulerCommand()
	case "kubectl":
		cmd = kubectlcmd.NewDefaultKubectlCommand()
	default:
		fmt.Fprintf(os.Stderr, "k8s-bin: unknown component %q\n", name)
		os.Exit(2)
	}
	cmd.SetArgs(args)
	os.Exit(cli.Run(cmd))
}
