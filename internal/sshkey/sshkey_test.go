package sshkey

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/crypto/ssh"
)

// The key written is the signer's, readable by its owner alone.
func TestWriteKeepsThePrivateKeyItReturns(t *testing.T) {
	file := filepath.Join(t.TempDir(), "id_ed25519")
	signer, err := Write(file, "a test")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	read, err := ssh.ParsePrivateKey(data)
	if err != nil || !bytes.Equal(read.PublicKey().Marshal(), signer.PublicKey().Marshal()) {
		t.Errorf("the file's key %v (%v) is not the signer's", read, err)
	}
	if info, err := os.Stat(file); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("mode %v (%v), want 0600", info.Mode().Perm(), err)
	}
}
