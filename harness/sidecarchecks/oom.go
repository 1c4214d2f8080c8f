package sidecarchecks

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skewer-k8s/skewer/harness/promise"
)

// HoggingSidecar is the native sidecar the OOM check has the kernel kill
// for memory, on purpose: a run that judges restarts is told it is meant,
// its OOM kill and its restarts.
const HoggingSidecar = "hog"

// The hog's memory: a limit the kernel holds it to, and what it takes -
// a step every half second, so the kill comes some 6 s after it starts,
// once the app has started beside it (a sidecar killed before its Pod's
// app starts would hold the app back instead).
const (
	hogLimit = 48 << 20
	hogStep  = 4 << 20
	hogEvery = "500ms"
)

// CheckOOMAlone judges sidecar.oom.restarts-alone on every kubelet: a
// native sidecar that takes memory past its limit is killed by the kernel
// (OOMKilled) and restarted by the kubelet alone, the app running on.
func (s *Sidecars) CheckOOMAlone(ctx context.Context) promise.Verdict {
	return s.onEach(ctx, "sidecar.oom.restarts-alone", func(ctx context.Context, k Kubelet) ([]string, error) {
		ns, done, err := s.namespace(ctx, nil)
		if err != nil {
			return nil, err
		}
		defer done()
		b := podBuilder{image: s.image, ns: ns, name: "oom", node: k.Name}
		hog := native(b.container(HoggingSidecar, "hog", "-step", strconv.Itoa(hogStep), "-every", hogEvery))
		limit := *resource.NewQuantity(hogLimit, resource.BinarySI)
		hog.Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: limit}, Limits: corev1.ResourceList{corev1.ResourceMemory: limit}}
		after, appStarted, err := s.appThenSidecar(ctx, b, hog, "the sidecar OOMKilled and restarted", func(st corev1.ContainerStatus) bool {
			return st.RestartCount >= 1 && oomKilled(st.LastTerminationState)
		})
		if err != nil {
			return nil, err
		}
		return judgeOOMAlone(after, appStarted)
	})
}

// oomKilled says a container's termination was the kernel's, for memory.
func oomKilled(st corev1.ContainerState) bool {
	return st.Terminated != nil && st.Terminated.Reason == "OOMKilled"
}

// judgeOOMAlone judges sidecar.oom.restarts-alone on the Pod once its
// sidecar was OOMKilled and restarted (after), the app having started at
// appStarted: the app never restarted and runs since then.
func judgeOOMAlone(after *corev1.Pod, appStarted metav1.Time) ([]string, error) {
	sidecar := after.Status.InitContainerStatuses[0]
	if !oomKilled(sidecar.LastTerminationState) {
		return nil, unjudged("the sidecar was not OOMKilled: %s", lastTermination(sidecar))
	}
	if err := appUntouched(after, appStarted, "its sidecar's OOM kill"); err != nil {
		return nil, err
	}
	killed := sidecar.LastTerminationState.Terminated
	if killed.FinishedAt.Before(&appStarted) { // to the second, as the API keeps both
		return nil, unjudged("the sidecar was OOMKilled at %s, before the app started at %s: nothing of the app ran through it",
			killed.FinishedAt.UTC().Format("15:04:05"), appStarted.UTC().Format("15:04:05"))
	}
	return []string{fmt.Sprintf("the sidecar (memory limit %s) was OOMKilled at %s (exit %d) and restarted alone (restarts: sidecar %d, app 0); the app runs on since %s",
		resource.NewQuantity(hogLimit, resource.BinarySI), killed.FinishedAt.UTC().Format("15:04:05"), killed.ExitCode, sidecar.RestartCount,
		appStarted.UTC().Format("15:04:05"))}, nil
}
