// Command writeload measures how many writes per second the local API server sustains for
// admitter's Workloads when the client costs next to nothing: it creates -n Workloads, then
// admits each (a status patch like the controller's), then finishes each (a status patch
// like the benchmarks'), with -concurrency requests in flight, and prints one JSON line per
// phase. It uses the standard library only, so it builds in seconds from an empty cache.
package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

type phase struct {
	Phase   string  `json:"phase"`
	Writes  int64   `json:"writes"`
	Failed  int64   `json:"failed"`
	Seconds float64 `json:"seconds"`
	PerSec  float64 `json:"writes_per_s"`
}

func main() {
	server := flag.String("server", "", "API server URL")
	ca := flag.String("ca", "", "CA certificate file")
	cert := flag.String("cert", "", "client certificate file")
	key := flag.String("key", "", "client key file")
	namespace := flag.String("namespace", "writeload", "namespace holding the Workloads")
	n := flag.Int("n", 5000, "Workloads per phase")
	concurrency := flag.Int("concurrency", 64, "requests in flight")
	flag.Parse()

	client, err := newClient(*ca, *cert, *key, *concurrency)
	if err != nil {
		fmt.Fprintln(os.Stderr, "writeload:", err)
		os.Exit(2)
	}
	base := fmt.Sprintf("%s/apis/admitter.dev/v1alpha1/namespaces/%s/workloads", *server, *namespace)
	stamp := time.Now().UTC().Format(time.RFC3339)
	phases := []struct {
		name string
		req  func(i int) (string, string, string, []byte)
	}{
		{"create", func(i int) (string, string, string, []byte) {
			return "POST", base, "application/json", mustJSON(map[string]any{
				"apiVersion": "admitter.dev/v1alpha1", "kind": "Workload",
				"metadata": map[string]any{"name": fmt.Sprintf("w-%d", i),
					"labels": map[string]any{"bench.admitter.dev/class": "small"}},
				"spec": map[string]any{"queueName": "default", "priority": 50, "minRuntime": "0.1s",
					"podSets": []any{map[string]any{"name": "main", "count": 1,
						"requests": map[string]any{"cpu": "1"}}}},
			})
		}},
		{"admit", func(i int) (string, string, string, []byte) {
			return "PATCH", fmt.Sprintf("%s/w-%d/status", base, i), "application/merge-patch+json",
				mustJSON(map[string]any{"status": map[string]any{
					"admission": map[string]any{"clusterQueue": "cq", "topologyDomain": map[string]any{},
						"nodeHints":  []any{map[string]any{"podSet": "main", "node": "node-0", "count": 1}},
						"admittedAt": stamp},
					"conditions": []any{
						condition("Admitted", "within fair share; placed anywhere in the cluster", stamp),
						condition("QuotaReserved", "quota reserved in ClusterQueue cq", stamp)},
				}})
		}},
		{"finish", func(i int) (string, string, string, []byte) {
			return "PATCH", fmt.Sprintf("%s/w-%d/status", base, i), "application/merge-patch+json",
				mustJSON(map[string]any{"status": map[string]any{"conditions": []any{
					condition("Admitted", "within fair share; placed anywhere in the cluster", stamp),
					condition("Finished", "runtime elapsed (benchmark)", stamp),
					condition("QuotaReserved", "quota reserved in ClusterQueue cq", stamp)}}})
		}},
	}
	out := json.NewEncoder(os.Stdout)
	for _, p := range phases {
		if err := out.Encode(run(client, p.name, *n, *concurrency, p.req)); err != nil {
			os.Exit(2)
		}
	}
}

func condition(kind, message, stamp string) map[string]any {
	return map[string]any{"type": kind, "status": "True", "reason": kind, "message": message,
		"lastTransitionTime": stamp}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func newClient(ca, cert, key string, conns int) (*http.Client, error) {
	pem, err := os.ReadFile(ca)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no certificate in %s", ca)
	}
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		return nil, err
	}
	transport := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}},
		MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns, ForceAttemptHTTP2: true,
	}
	return &http.Client{Transport: transport, Timeout: 60 * time.Second}, nil
}

func run(client *http.Client, name string, n, concurrency int,
	req func(i int) (string, string, string, []byte)) phase {
	var next, ok, failed atomic.Int64
	var wg sync.WaitGroup
	started := time.Now()
	for w := 0; w < concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				method, url, contentType, body := req(i)
				r, _ := http.NewRequest(method, url, bytes.NewReader(body))
				r.Header.Set("Content-Type", contentType)
				resp, err := client.Do(r)
				if err != nil {
					failed.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode >= 300 {
					failed.Add(1)
					if failed.Load() <= 3 {
						fmt.Fprintf(os.Stderr, "writeload: %s %s: %s\n", method, url, resp.Status)
					}
					continue
				}
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	seconds := time.Since(started).Seconds()
	return phase{name, ok.Load(), failed.Load(), seconds, float64(ok.Load()) / seconds}
}
