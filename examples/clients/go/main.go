// One call through pinproxy from Go (standard library only).
//
//	cd examples/clients/go && go run .
//
// Proxy step: http.ProxyFromEnvironment reads HTTPS_PROXY (this program sets it
// from $PINPROXY when unset). Note that it never proxies requests to
// localhost or 127.0.0.1, whatever the environment says.
//
// Trust step, two ways:
//   - no code: SSL_CERT_FILE=state/ca.pem makes crypto/x509 load that file
//     instead of the system roots (on Linux and other Unix systems; not on
//     macOS or Windows, which ask the OS);
//   - in code, as below: the system roots plus pinproxy's CA in an explicit
//     pool, so the same binary also reaches hosts outside the proxy.
package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

func getenv(name, fallback string) string {
	if value := os.Getenv(name); value != "" {
		return value
	}
	return fallback
}

func main() {
	proxy := getenv("PINPROXY", "http://127.0.0.1:8080")
	caFile := getenv("PINPROXY_CA", "state/ca.pem")
	apiURL := getenv("API_URL", "https://api.spotify.com/v1/markets")
	if os.Getenv("HTTPS_PROXY") == "" {
		os.Setenv("HTTPS_PROXY", proxy)
	}

	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "read pinproxy CA:", err)
		os.Exit(1)
	}
	if !pool.AppendCertsFromPEM(pem) {
		fmt.Fprintln(os.Stderr, "no certificate in", caFile)
		os.Exit(1)
	}

	client := &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			Proxy:           http.ProxyFromEnvironment,
			TLSClientConfig: &tls.Config{RootCAs: pool},
		},
	}
	response, err := client.Get(apiURL)
	if err != nil {
		// A refusal at CONNECT (client not allowed, host denied) surfaces here.
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer response.Body.Close()
	body, _ := io.ReadAll(response.Body)
	fmt.Println(string(body))
	status := fmt.Sprintf("HTTP %d", response.StatusCode)
	if reason := response.Header.Get("X-Pinproxy-Error"); reason != "" {
		status += " (pinproxy: " + reason + ")"
	}
	fmt.Fprintln(os.Stderr, status)
}
