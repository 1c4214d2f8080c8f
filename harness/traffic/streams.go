package traffic

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// startStreams starts target's two streams, on a reused connection and on
// new connections.
func (t *Traffic) startStreams(target string, cfg *rest.Config) {
	for _, conn := range []string{Reused, New} {
		st := stream{target, conn}
		ctx, cancel := context.WithCancel(t.ctx)
		t.mu.Lock()
		t.streams[st] = cancel
		t.mu.Unlock()
		cfg := rest.CopyConfig(cfg)
		cfg.Timeout = t.opts.Timeout
		cfg.QPS, cfg.Burst = -1, 0 // the stream's own interval paces it
		if conn == New {
			newConnections(cfg)
		}
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			t.stream(ctx, st, cfg)
		}()
	}
}

// stream writes a ConfigMap carrying a sequence number, reads it back and
// asks for the new API, every interval, until ctx ends. On new
// connections it only writes: one request per connection is the point,
// and the write is the request that needs the whole apiserver (etcd too).
func (t *Traffic) stream(ctx context.Context, st stream, cfg *rest.Config) {
	target := st.target
	ids := &auditID{}
	cfg.Wrap(ids.wrap)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return
	}
	server := serverVersion(cfg)
	interval := t.opts.DirectInterval
	if target == "lb" {
		interval = t.opts.Interval
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for round := 1; ; round++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if round%25 == 0 {
			if v := serverVersion(cfg); v != "" {
				server = v
			}
		}
		seq := t.seq.Add(1)
		name := fmt.Sprintf("w-%07d-%s-%s", seq, strings.TrimPrefix(target, t.c.Name+"-"), st.conn)
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{writeLabel: "write"}},
			Data:       map[string]string{"seq": fmt.Sprint(seq), "target": target},
		}
		start := time.Now()
		_, err := cs.CoreV1().ConfigMaps(t.opts.Namespace).Create(ctx, cm, metav1.CreateOptions{})
		code := statusCode(err, http.StatusCreated)
		if ctx.Err() != nil {
			return
		}
		t.add(Record{Time: start, Target: target, Conn: st.conn, Server: server, Verb: "create", Object: "configmaps/" + name,
			Code: code, Latency: time.Since(start), Err: errString(err), Probe: "write", AuditID: ids.take()})
		if code == http.StatusCreated {
			t.mu.Lock()
			t.acked[name] = true
			t.mu.Unlock()
		}
		if st.conn == New {
			continue
		}
		if code == http.StatusCreated {
			start = time.Now()
			_, err = cs.CoreV1().ConfigMaps(t.opts.Namespace).Get(ctx, name, metav1.GetOptions{})
			t.add(Record{Time: start, Target: target, Conn: st.conn, Server: server, Verb: "get", Object: "configmaps/" + name,
				Code: statusCode(err, http.StatusOK), Latency: time.Since(start), Err: errString(err), Probe: "read", AuditID: ids.take()})
		}
		if t.opts.NewAPIPath != "" {
			t.add(t.askNewAPI(ctx, cs, st, server, ids))
		}
	}
}

// askNewAPI lists the collection only newer apiservers serve, through
// st's target, and is the record of it.
func (t *Traffic) askNewAPI(ctx context.Context, cs kubernetes.Interface, st stream, server string, ids *auditID) Record {
	start := time.Now()
	var status int
	err := cs.Discovery().RESTClient().Get().AbsPath(t.opts.NewAPIPath).Do(ctx).StatusCode(&status).Error()
	if status == 0 {
		status = statusCode(err, http.StatusOK)
	}
	return Record{Time: start, Target: st.target, Conn: st.conn, Server: server, Verb: "list", Object: t.opts.NewAPIPath,
		Code: status, Latency: time.Since(start), Err: errString(err), Probe: "new-api", AuditID: ids.take()}
}

func statusCode(err error, ok int) int {
	if err == nil {
		return ok
	}
	if s, isStatus := err.(apierrors.APIStatus); isStatus && s.Status().Code != 0 {
		return int(s.Status().Code)
	}
	return 0
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// watch keeps an informer on the written objects through the load
// balancer; it relists and rewatches across apiserver restarts as any
// controller would.
func (t *Traffic) watch(cs kubernetes.Interface) error {
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(t.opts.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = writeLabel + "=write" }))
	inf := f.Core().V1().ConfigMaps().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		if cm, ok := obj.(*corev1.ConfigMap); ok {
			t.mu.Lock()
			t.seen[cm.Name] = true
			t.mu.Unlock()
		}
	}})
	if err != nil {
		return err
	}
	f.Start(t.ctx.Done())
	return nil
}
