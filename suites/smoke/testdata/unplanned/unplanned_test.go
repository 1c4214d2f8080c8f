// Package unplanned is a suite that does what it does not declare: it
// kills CoreDNS and restarts a kubelet in a feature with no restarts
// label. suites/smoke runs it against its own cluster and expects it to
// fail, name both, export its evidence and leave nothing running. It is
// under testdata so that ./... never runs it on its own.
package unplanned

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/skewer-k8s/skewer/harness/restarts"
	"github.com/skewer-k8s/skewer/harness/suite"
)

var s *suite.Suite

func TestMain(m *testing.M) { suite.Main(m, "ha", &s) }

func TestUnplanned(t *testing.T) {
	f := features.New("kills what it does not declare").
		Assess("CoreDNS killed and a kubelet restarted from outside", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			g := NewWithT(t)
			cs, err := s.Cluster.Client()
			g.Expect(err).NotTo(HaveOccurred())
			pods, err := cs.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pods.Items).NotTo(BeEmpty())
			victim := pods.Items[0]
			node, err := s.Cluster.Node(ctx, victim.Spec.NodeName)
			g.Expect(err).NotTo(HaveOccurred())
			t.Logf("killing every coredns on %s and restarting its kubelet", node.Name)
			_, err = node.Run(ctx, "pkill", "-9", "-x", "coredns")
			g.Expect(err).NotTo(HaveOccurred())
			_, err = node.Run(ctx, "systemctl", "restart", "kubelet")
			g.Expect(err).NotTo(HaveOccurred())
			// Seen before the suite ends, so its verdict has them.
			g.Eventually(s.Events).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(And(
				ContainElement(HaveField("Pod", victim.Name)),
				ContainElement(And(HaveField("Kind", restarts.Kubelet), HaveField("Node", node.Name)))))
			return ctx
		}).
		Feature()
	s.Env.Test(t, f)
}
