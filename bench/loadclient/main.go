// loadclient is the benchmark's HTTP client: a bounded, verifying load
// generator that can go through an HTTP proxy (CONNECT).
//
// Why not hey or wrk: wrk cannot use a proxy, and hey never verifies
// certificates, so neither can prove that the client was served the
// intercepting proxy's certificate. This client trusts only -ca, checks the
// hostname, checks the issuer's common name when -issuer is given, and checks
// every response's status and length. Any failure is counted and reported;
// a run with errors is marked as such by the caller.
//
// Every run is bounded by -duration and -max-requests and stops by itself.
// It prints one JSON object on stdout.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

type result struct {
	Mode        string  `json:"mode"`
	Requests    int64   `json:"requests"`
	Errors      int64   `json:"errors"`
	FirstError  string  `json:"first_error,omitempty"`
	Seconds     float64 `json:"seconds"`
	RPS         float64 `json:"rps"`
	P50ms       float64 `json:"p50_ms"`
	P99ms       float64 `json:"p99_ms"`
	Bytes       int64   `json:"bytes"`
	MiBs        float64 `json:"mib_s"`
	Issuer      string  `json:"issuer,omitempty"`
	Resumed     int64   `json:"resumed"`
	Connections int     `json:"connections,omitempty"`
}

var (
	target      = flag.String("url", "", "https URL to fetch")
	proxyURL    = flag.String("proxy", "", "http://host:port of the proxy; empty for direct")
	caFile      = flag.String("ca", "", "the only CA certificate to trust (PEM)")
	issuer      = flag.String("issuer", "", "required common name of the leaf's issuer")
	mode        = flag.String("mode", "keepalive", "keepalive | newconn | idle | h2")
	concurrency = flag.Int("c", 16, "concurrent clients")
	duration    = flag.Duration("duration", 10*time.Second, "how long to run (upper bound)")
	maxRequests = flag.Int64("max-requests", 5_000_000, "stop after this many requests (upper bound)")
	expectBytes = flag.Int64("bytes", -1, "expected body length; -1 = any")
	resume      = flag.Bool("resume", true, "newconn: resume TLS sessions across connections")
	idleConns   = flag.Int("n", 1000, "idle: connections to open and hold")
	hold        = flag.Duration("hold", 10*time.Second, "idle: how long to hold them (upper bound; stdin EOF ends it sooner)")
	rate        = flag.Float64("rate", 0, "requests per second, all workers together, started on a fixed schedule; 0 = back to back")
)

type counters struct {
	requests, errors, bytes, resumed atomic.Int64
	firstError                       atomic.Value
	issuer                           atomic.Value
}

func (c *counters) fail(err error) {
	c.errors.Add(1)
	c.firstError.CompareAndSwap(nil, err.Error())
}

func main() {
	flag.Parse()
	if *target == "" || *caFile == "" {
		fmt.Fprintln(os.Stderr, "loadclient: -url and -ca are required")
		os.Exit(2)
	}
	pem, err := os.ReadFile(*caFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadclient:", err)
		os.Exit(2)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		fmt.Fprintln(os.Stderr, "loadclient: no certificate in", *caFile)
		os.Exit(2)
	}
	tlsConfig := &tls.Config{
		RootCAs:          roots,
		MinVersion:       tls.VersionTLS13,
		CurvePreferences: []tls.CurveID{tls.CurveP256},
	}
	if *mode == "newconn" && *resume {
		tlsConfig.ClientSessionCache = tls.NewLRUClientSessionCache(4 * *concurrency)
	}
	var proxy func(*http.Request) (*url.URL, error)
	if *proxyURL != "" {
		u, err := url.Parse(*proxyURL)
		if err != nil {
			fmt.Fprintln(os.Stderr, "loadclient:", err)
			os.Exit(2)
		}
		proxy = http.ProxyURL(u)
	}
	newTransport := func(keepAlive bool, conns int) *http.Transport {
		return &http.Transport{
			Proxy:               proxy,
			TLSClientConfig:     tlsConfig,
			DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
			DisableKeepAlives:   !keepAlive,
			MaxIdleConns:        conns,
			MaxIdleConnsPerHost: conns,
			MaxConnsPerHost:     conns,
			TLSHandshakeTimeout: 10 * time.Second,
			DisableCompression:  true,
		}
	}

	var c counters
	var res result
	res.Mode = *mode
	switch *mode {
	case "keepalive", "newconn":
		res = runLoad(&c, newTransport(*mode == "keepalive", *concurrency))
	case "h2":
		// One app connection, -c requests in flight on it as HTTP/2 streams.
		transport := newTransport(true, 1)
		transport.ForceAttemptHTTP2 = true
		res = runLoad(&c, transport)
	case "idle":
		res = runIdle(&c, func() *http.Transport { return newTransport(true, 1) })
	default:
		fmt.Fprintln(os.Stderr, "loadclient: unknown -mode", *mode)
		os.Exit(2)
	}
	res.Mode = *mode
	res.Requests = c.requests.Load()
	res.Errors = c.errors.Load()
	res.Bytes = c.bytes.Load()
	res.Resumed = c.resumed.Load()
	if v, ok := c.firstError.Load().(string); ok {
		res.FirstError = v
	}
	if v, ok := c.issuer.Load().(string); ok {
		res.Issuer = v
	}
	if res.Seconds > 0 {
		// Only verified answers count: a path that fails fast must not look fast.
		res.RPS = float64(res.Requests-res.Errors) / res.Seconds
		res.MiBs = float64(res.Bytes) / res.Seconds / (1 << 20)
	}
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
}

// fetch makes one verified request and returns its body length.
func fetch(c *counters, client *http.Client, ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, *target, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	n, copyErr := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if copyErr != nil {
		return copyErr
	}
	if *mode == "h2" && resp.ProtoMajor != 2 {
		return fmt.Errorf("answered over %s, not HTTP/2", resp.Proto)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d (X-Pinproxy-Error %q)", resp.StatusCode, resp.Header.Get("X-Pinproxy-Error"))
	}
	if *expectBytes >= 0 && n != *expectBytes {
		return fmt.Errorf("body of %d bytes, expected %d", n, *expectBytes)
	}
	if resp.TLS == nil || len(resp.TLS.PeerCertificates) == 0 {
		return errors.New("response not over TLS")
	}
	got := resp.TLS.PeerCertificates[0].Issuer.CommonName
	if *issuer != "" && got != *issuer {
		return fmt.Errorf("leaf issued by %q, expected %q", got, *issuer)
	}
	c.issuer.CompareAndSwap(nil, got)
	if resp.TLS.DidResume {
		c.resumed.Add(1)
	}
	c.bytes.Add(n)
	return nil
}

// runLoad: -c workers, each issuing requests back to back until the deadline
// or the request budget is spent. Latencies are kept per worker and merged.
// With -rate, request n starts no earlier than n/rate seconds after the
// start (whichever worker is free takes it): the offered load is the same
// for every path, so a path's CPU per request is compared at one rate, not
// at the rate each path reaches on its own. A path that cannot keep up
// falls behind the schedule (its req/s says so).
func runLoad(c *counters, transport *http.Transport) result {
	client := &http.Client{Transport: transport, Timeout: 30 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), *duration)
	defer cancel()
	deadline, _ := ctx.Deadline()
	var budget atomic.Int64
	budget.Store(*maxRequests)
	var scheduled atomic.Int64
	latencies := make([][]time.Duration, *concurrency)
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < *concurrency; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for time.Now().Before(deadline) && budget.Add(-1) >= 0 {
				if *rate > 0 {
					slot := start.Add(time.Duration(float64(scheduled.Add(1)-1) / *rate * float64(time.Second)))
					if !slot.Before(deadline) {
						return
					}
					time.Sleep(time.Until(slot))
				}
				t0 := time.Now()
				err := fetch(c, client, ctx)
				// Cut off by the deadline: neither a success nor a failure. The
				// clock decides, not ctx.Err(): a dial's poller reports "i/o
				// timeout" at the deadline before the context's own timer has
				// run, and on a loaded machine that timer can be late by
				// milliseconds, long enough for a worker to fail request after
				// request on a deadline already passed (the "dial timeouts" of
				// earlier full runs).
				if !time.Now().Before(deadline) {
					return
				}
				c.requests.Add(1)
				if err != nil {
					c.fail(err)
					continue
				}
				latencies[w] = append(latencies[w], time.Since(t0))
			}
		}(w)
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	transport.CloseIdleConnections()
	var all []time.Duration
	for _, l := range latencies {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	pct := func(p float64) float64 {
		if len(all) == 0 {
			return 0
		}
		return float64(all[int(p*float64(len(all)-1))].Microseconds()) / 1000
	}
	return result{Seconds: elapsed, P50ms: pct(0.50), P99ms: pct(0.99)}
}

// runIdle opens -n connections, one request on each, and keeps them open and
// idle; it prints "ready N" on stderr once all are open, then holds them until
// -hold passes or stdin reaches EOF, whichever is first.
func runIdle(c *counters, newTransport func() *http.Transport) result {
	ctx, cancel := context.WithTimeout(context.Background(), *duration+*hold)
	defer cancel()
	transports := make([]*http.Transport, *idleConns)
	sem := make(chan struct{}, *concurrency)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range transports {
		transports[i] = newTransport()
		wg.Add(1)
		sem <- struct{}{}
		go func(t *http.Transport) {
			defer wg.Done()
			defer func() { <-sem }()
			c.requests.Add(1)
			if err := fetch(c, &http.Client{Transport: t, Timeout: 30 * time.Second}, ctx); err != nil {
				c.fail(err)
			}
		}(transports[i])
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	fmt.Fprintf(os.Stderr, "ready %d\n", *idleConns-int(c.errors.Load()))
	done := make(chan struct{})
	go func() { io.Copy(io.Discard, os.Stdin); close(done) }()
	select {
	case <-done:
	case <-time.After(*hold):
	}
	for _, t := range transports {
		t.CloseIdleConnections()
	}
	return result{Seconds: elapsed, Connections: *idleConns - int(c.errors.Load())}
}
