package faults

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"math/big"
	"net"
	"testing"
	"time"
)

// The untrusted certificate answers to every name the apiserver's own
// does, and is verified by the fault's CA and by no other: what makes the
// peer's proxy fail at the handshake, not at a name mismatch.
func TestUntrustedLikeKeepsNamesAndOnlyItsCAVerifies(t *testing.T) {
	ownPEM := kubeadmLike(t)
	caPEM, certPEM, keyPEM, err := untrustedLike(ownPEM)
	if err != nil {
		t.Fatal(err)
	}
	own, leaf := parse(t, ownPEM), parse(t, certPEM)
	if leaf.Subject.CommonName != own.Subject.CommonName || len(leaf.DNSNames) != 3 || len(leaf.IPAddresses) != 3 {
		t.Fatalf("names differ: %v %v %v", leaf.Subject, leaf.DNSNames, leaf.IPAddresses)
	}
	verify := func(ca []byte, name string) error {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(ca)
		_, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: name})
		return err
	}
	for _, name := range []string{"kubernetes.default.svc", "127.0.0.1", "172.18.0.4"} {
		if err := verify(caPEM, name); err != nil {
			t.Errorf("the fault's CA, %s: %v", name, err)
		}
	}
	if err := verify(ownPEM, "kubernetes.default.svc"); err == nil {
		t.Error("the apiserver's own (self-signed) certificate verified the untrusted one")
	}
	if b, _ := pem.Decode(keyPEM); b == nil || b.Type != "EC PRIVATE KEY" {
		t.Errorf("key: %q", keyPEM)
	}
	if _, _, _, err := untrustedLike([]byte("not a certificate")); err == nil {
		t.Error("garbage was taken for a serving certificate")
	}
}

// kubeadmLike is a self-signed certificate with the names kubeadm gives
// an apiserver's in a kind cluster.
func kubeadmLike(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames:    []string{"kubernetes", "kubernetes.default.svc", "localhost"},
		IPAddresses: []net.IP{net.ParseIP("10.96.0.1"), net.ParseIP("127.0.0.1"), net.ParseIP("172.18.0.4")},
		IsCA:        true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	tmpl.Subject.CommonName = "kube-apiserver"
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func parse(t *testing.T, p []byte) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(p)
	if b == nil {
		t.Fatalf("not PEM: %q", p)
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
