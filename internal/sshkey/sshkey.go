// Package sshkey makes the SSH key pairs of machines made for a run (stand-ins, and the
// SSH servers the tests play machines with): the one place a key is generated and written.
package sshkey

import (
	"crypto/ed25519"
	"encoding/pem"
	"os"

	"golang.org/x/crypto/ssh"
)

// Write makes a new ed25519 key pair, writes its private key to file (mode 0600, OpenSSH's
// format, with comment) and returns it as a signer, whose PublicKey is the pair's other half.
func Write(file, comment string) (ssh.Signer, error) {
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		return nil, err
	}
	block, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(file, pem.EncodeToMemory(block), 0o600); err != nil {
		return nil, err
	}
	return ssh.NewSignerFromKey(priv)
}
