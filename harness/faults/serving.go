package faults

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/skewer-k8s/skewer/harness/cluster"
)

// Where UntrustedServing keeps its certificate on the node: in the
// directory the apiserver's static Pod already mounts.
const (
	servingCertPath = "/etc/kubernetes/pki/apiserver.crt"
	untrustedCert   = "/etc/kubernetes/pki/skewer-untrusted-serving.crt"
	untrustedKey    = "/etc/kubernetes/pki/skewer-untrusted-serving.key"
)

// UntrustedServing restarts Node's apiserver serving a certificate with
// the names of its own (subject, DNS names and IP addresses), signed by a
// CA made for the fault and held nowhere else: not in any --peer-ca-file,
// not in any kubeconfig. Every client that verifies the apiserver - its
// peers' Mixed Version Proxy among them - fails the TLS handshake with it
// until Revert restores its manifest (and waits for its /readyz) and
// removes the certificate.
type UntrustedServing struct {
	Node     cluster.Node
	original string
	// CA is the fault's CA, PEM: the one thing that verifies the
	// apiserver while the fault holds.
	CA []byte
}

func (u *UntrustedServing) Name() string {
	return "restart the apiserver of " + u.Node.Name + " serving a certificate no peer CA signed"
}

func (u *UntrustedServing) Inject(ctx context.Context, c *cluster.Cluster) error {
	raw, err := u.Node.Run(ctx, "cat", manifest)
	if err != nil {
		return err
	}
	own, err := u.Node.ReadFile(ctx, servingCertPath)
	if err != nil {
		return err
	}
	caPEM, certPEM, keyPEM, err := untrustedLike(own)
	if err != nil {
		return fmt.Errorf("%s: %w", u.Name(), err)
	}
	changed, err := editFlags(raw, map[string]string{"tls-cert-file": untrustedCert, "tls-private-key-file": untrustedKey}, nil, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", u.Name(), err)
	}
	if err := u.Node.WriteFile(ctx, untrustedCert, certPEM, 0o644); err != nil {
		return err
	}
	if err := u.Node.WriteFile(ctx, untrustedKey, keyPEM, 0o600); err != nil {
		return err
	}
	u.original, u.CA = raw, caPEM
	// The kubelet, which verifies its apiserver with the cluster's CA,
	// is refused by this one.
	if err := replaceManifest(ctx, c, u.Node, changed, false); err != nil {
		return fmt.Errorf("%s: %w", u.Name(), err)
	}
	// Ready as the fault's CA sees it: nothing else can tell.
	cfg, err := c.APIServerConfig(ctx, u.Node)
	if err != nil {
		return err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.TLSClientConfig.CAData, cfg.TLSClientConfig.CAFile = caPEM, ""
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	return cluster.WaitHealthy(ctx, "faults/apiserver-restart", u.Node.Name+"'s apiserver /readyz under the fault's CA", cs, cluster.Readyz)
}

func (u *UntrustedServing) Revert(ctx context.Context, c *cluster.Cluster) error {
	if u.original == "" {
		return nil
	}
	if err := restartWith(ctx, c, u.Node, u.original, false); err != nil {
		return fmt.Errorf("revert %s: %w", u.Name(), err)
	}
	u.original = ""
	if _, err := u.Node.Run(ctx, "rm", "-f", untrustedCert, untrustedKey); err != nil {
		return fmt.Errorf("revert %s: %w", u.Name(), err)
	}
	return nil
}

// untrustedLike makes a CA and, signed by it, a serving certificate with
// the subject and names of ownPEM's; all PEM, the key unencrypted.
func untrustedLike(ownPEM []byte) (caPEM, certPEM, keyPEM []byte, err error) {
	block, _ := pem.Decode(ownPEM)
	if block == nil {
		return nil, nil, nil, fmt.Errorf("the apiserver's serving certificate is not PEM")
	}
	own, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, nil, nil, err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(now.UnixNano()),
		Subject:               pkix.Name{CommonName: "skewer untrusted CA (no peer CA, no kubeconfig holds it)"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano() + 1),
		Subject:      own.Subject,
		DNSNames:     own.DNSNames,
		IPAddresses:  own.IPAddresses,
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}
