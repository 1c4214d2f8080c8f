package sidecar

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
)

// Selection picks one batch's Deployments: those in Namespace (every
// namespace when empty) whose labels match LabelSelector (all of them
// when empty). One of the two is needed: a selection of every Deployment
// of the cluster is refused.
type Selection struct{ Namespace, LabelSelector string }

func (s Selection) String() string {
	switch {
	case s.Namespace == "":
		return "Deployments labelled " + s.LabelSelector + " in every namespace"
	case s.LabelSelector == "":
		return "Deployments in " + s.Namespace
	}
	return "Deployments labelled " + s.LabelSelector + " in " + s.Namespace
}

// Validate refuses a selection of everything and a selector that does
// not parse, without asking the API server.
func (s Selection) Validate() error {
	if s.Namespace == "" && s.LabelSelector == "" {
		return errors.New("a selection needs a namespace or a label selector: it would pick every Deployment of the cluster, kube-system's too")
	}
	if _, err := labels.Parse(s.LabelSelector); err != nil {
		return fmt.Errorf("label selector %q: %w", s.LabelSelector, err)
	}
	return nil
}

// selectBatches resolves selections into batches, one per selection, in
// their order, before anything changes: a selection that picks no
// Deployment, or a Deployment two selections pick, is refused.
func selectBatches(ctx context.Context, cs kubernetes.Interface, selections []Selection) ([][]Target, error) {
	seen := map[Target]int{}
	var out [][]Target
	for i, s := range selections {
		list, err := cs.AppsV1().Deployments(s.Namespace).List(ctx, metav1.ListOptions{LabelSelector: s.LabelSelector})
		if err != nil {
			return nil, fmt.Errorf("failed to list the %s: %w", s, err)
		}
		var batch []Target
		for _, d := range list.Items {
			t := Target{Namespace: d.Namespace, Name: d.Name}
			if j, dup := seen[t]; dup {
				return nil, fmt.Errorf("invalid migration: %s is picked by selection %d (%s) and by selection %d (%s)", t, j+1, selections[j], i+1, s)
			}
			seen[t] = i
			batch = append(batch, t)
		}
		if len(batch) == 0 {
			return nil, fmt.Errorf("invalid migration: selection %d picks no Deployment: no %s", i+1, s)
		}
		slices.SortFunc(batch, func(a, b Target) int {
			return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
		})
		out = append(out, batch)
	}
	return out, nil
}
