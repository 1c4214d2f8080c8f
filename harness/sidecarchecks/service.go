package sidecarchecks

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// service makes Service ns/name in front of the Pods selector picks, on
// the proxy fixture's port.
func (s *Sidecars) service(ctx context.Context, ns, name string, selector map[string]string) error {
	_, err := s.cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Selector: selector, Ports: []corev1.ServicePort{{Port: 8080}}}}, metav1.CreateOptions{})
	return err
}

// endpointSlices are Service ns/name's EndpointSlices.
func (s *Sidecars) endpointSlices(ctx context.Context, ns, name string) ([]discoveryv1.EndpointSlice, error) {
	eps, err := s.cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name})
	if err != nil {
		return nil, err
	}
	return eps.Items, nil
}

// readyAddresses are the addresses slices hold, each true when it is a
// ready endpoint (the last slice that holds it says).
func readyAddresses(slices []discoveryv1.EndpointSlice) map[string]bool {
	ready := map[string]bool{}
	for _, sl := range slices {
		for _, ep := range sl.Endpoints {
			for _, a := range ep.Addresses {
				ready[a] = ep.Conditions.Ready != nil && *ep.Conditions.Ready
			}
		}
	}
	return ready
}
