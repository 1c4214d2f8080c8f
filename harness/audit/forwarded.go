package audit

import (
	"errors"
	"io/fs"
	"sort"
	"time"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
)

// Silence is how long an apiserver of a skewer cluster logs nothing only
// when it is down: a live one logs its controllers' and its peers'
// requests at least every second or so (the longest quiet measured on a
// live server: 2.9 s, in an in-place run on 2 cores), while a restart
// takes more than 7 s.
const Silence = 5 * time.Second

// Forward is one request two apiservers logged under one audit ID: the
// entry server that took it from its client (the first to receive it)
// and the peer the Mixed Version Proxy forwarded it to.
type Forward struct {
	ID       string    `json:"id"`
	Verb     string    `json:"verb"`
	URI      string    `json:"uri"`
	User     string    `json:"user"`
	Received time.Time `json:"received"`
	Entry    Side      `json:"entry"`
	Peer     Side      `json:"peer"`
	// Others are further servers that logged the ID (none, when the
	// proxy forwards once).
	Others []string `json:"others,omitempty"`
}

// Side is what one apiserver logged of a forwarded request.
type Side struct {
	Server string `json:"server"`
	// Finals are the final stages it logged: ResponseComplete or Panic,
	// one when all is well, none when it never ended the request.
	Finals []string  `json:"finals,omitempty"`
	Ended  time.Time `json:"ended,omitzero"`
	// Down is, for a side that logged no final stage, when its server
	// went silent for longer than Silence after it received the request
	// (its last event before the silence), or logged nothing more at all:
	// it went down with the request open. Zero when it was up to the end
	// of the logs: the request is open there still.
	Down time.Time `json:"down,omitzero"`
}

// Complete says whether the side ended the request once.
func (s Side) Complete() bool { return len(s.Finals) == 1 }

// logged is what one server logged of one audit ID.
type logged struct {
	received time.Time
	verb     string
	uri      string
	user     string
	finals   []string
	ended    time.Time
}

// serverLog is one apiserver's log, reduced: its requests by audit ID,
// and the silences in it.
type serverLog struct {
	name     string
	requests map[string]*logged
	// silences are [from, to) spans with no event longer than Silence;
	// the last one is open (to is zero) if the log ends before the others.
	silences  [][2]time.Time
	last      time.Time
	handovers []time.Time
}

// Forwarded reads the audit logs at paths (one per apiserver, named by
// its directory; a missing one is skipped) and returns every request that
// more than one of them logged, in the order received, with how each side
// ended it. handovers are, by server, the moments its apiserver process
// gave way to another (cluster.Handovers): a side that never ended a
// request went down at the first one after it received it, silent or not.
func Forwarded(paths []string, handovers map[string][]time.Time) ([]Forward, error) {
	var logs []*serverLog
	var end time.Time // the last event of any log: the end of the run
	for _, p := range paths {
		l := &serverLog{name: ServerOf(p), requests: map[string]*logged{}, handovers: handovers[ServerOf(p)]}
		_, err := Read(p, func(e *Event) bool {
			l.add(e)
			return false
		})
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if l.last.After(end) {
			end = l.last
		}
		logs = append(logs, l)
	}
	for _, l := range logs {
		if !l.last.IsZero() && end.Sub(l.last) > Silence {
			l.silences = append(l.silences, [2]time.Time{l.last, {}})
		}
	}
	seen := map[string][]*serverLog{}
	for _, l := range logs {
		for id := range l.requests {
			seen[id] = append(seen[id], l)
		}
	}
	var out []Forward
	for id, ls := range seen {
		if len(ls) < 2 {
			continue
		}
		sort.Slice(ls, func(i, j int) bool { return ls[i].requests[id].received.Before(ls[j].requests[id].received) })
		first := ls[0].requests[id]
		f := Forward{ID: id, Verb: first.verb, URI: first.uri, User: first.user, Received: first.received,
			Entry: ls[0].side(id), Peer: ls[1].side(id)}
		for _, l := range ls[2:] {
			f.Others = append(f.Others, l.name)
		}
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Received.Before(out[j].Received) })
	return out, nil
}

func (l *serverLog) add(e *Event) {
	at := e.StageTimestamp.Time
	if !l.last.IsZero() && at.Sub(l.last) > Silence {
		l.silences = append(l.silences, [2]time.Time{l.last, at})
	}
	if at.After(l.last) {
		l.last = at
	}
	r := l.requests[string(e.AuditID)]
	if r == nil {
		r = &logged{received: e.RequestReceivedTimestamp.Time, verb: e.Verb, uri: e.RequestURI, user: e.User.Username}
		l.requests[string(e.AuditID)] = r
	}
	if e.Stage == auditv1.StageResponseComplete || e.Stage == auditv1.StagePanic {
		r.finals = append(r.finals, string(e.Stage))
		r.ended = at
	}
}

// side is what l logged of id, and for a request it never ended, when
// its server went down after receiving it.
func (l *serverLog) side(id string) Side {
	r := l.requests[id]
	s := Side{Server: l.name, Finals: r.finals, Ended: r.ended}
	if len(r.finals) == 0 {
		for _, gap := range l.silences {
			if !gap[0].Before(r.received) {
				s.Down = gap[0]
				break
			}
		}
		for _, h := range l.handovers {
			if !h.Before(r.received) && (s.Down.IsZero() || h.Before(s.Down)) {
				s.Down = h
				break
			}
		}
	}
	return s
}
