package notify

import (
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// VAPID is the server's key pair for Web Push (RFC 8292): P-256, both
// halves base64url without padding, as browsers' applicationServerKey
// and webpush-go take them.
type VAPID struct {
	PublicKey  string `json:"public_key"`
	PrivateKey string `json:"private_key"`
}

// LoadOrCreateVAPID reads the key pair at path, or, when there is no
// file, makes one and writes it there (mode 0600, never over a file
// another process wrote meanwhile). Every instance must use the same
// pair: browsers subscribed with its public half.
func LoadOrCreateVAPID(path string) (VAPID, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		v, err := NewVAPID()
		if err != nil {
			return VAPID{}, err
		}
		out, _ := json.MarshalIndent(v, "", "  ")
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			return LoadOrCreateVAPID(path) // another process made it first
		}
		if err != nil {
			return VAPID{}, fmt.Errorf("vapid key file: %w", err)
		}
		_, werr := f.Write(append(out, '\n'))
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return VAPID{}, fmt.Errorf("vapid key file %s: %w", path, werr)
		}
		return v, nil
	}
	if err != nil {
		return VAPID{}, fmt.Errorf("vapid key file: %w", err)
	}
	var v VAPID
	if err := json.Unmarshal(b, &v); err != nil {
		return VAPID{}, fmt.Errorf("vapid key file %s: %w", path, err)
	}
	if err := v.check(); err != nil {
		return VAPID{}, fmt.Errorf("vapid key file %s: %w", path, err)
	}
	return v, nil
}

// NewVAPID makes a fresh key pair.
func NewVAPID() (VAPID, error) {
	k, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		return VAPID{}, err
	}
	return VAPID{PublicKey: b64(k.PublicKey().Bytes()), PrivateKey: b64(k.Bytes())}, nil
}

// check makes sure the halves belong together.
func (v VAPID) check() error {
	priv, err := base64.RawURLEncoding.DecodeString(v.PrivateKey)
	if err != nil {
		return fmt.Errorf("private_key is not base64url: %w", err)
	}
	k, err := ecdh.P256().NewPrivateKey(priv)
	if err != nil {
		return fmt.Errorf("private_key is not a P-256 key: %w", err)
	}
	if b64(k.PublicKey().Bytes()) != v.PublicKey {
		return errors.New("public_key is not the private key's")
	}
	return nil
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
