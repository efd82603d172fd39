package notify

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"net/http"
	"strings"
	"time"

	"github.com/waitroom/waitroom"
)

// The return link's errors: each is 403 with its code.
var (
	ErrLinkInvalid   = &waitroom.Error{Code: "RETURN_LINK_INVALID", Message: "this return link is not one this waiting room made", Status: http.StatusForbidden}
	ErrLinkExpired   = &waitroom.Error{Code: "RETURN_LINK_EXPIRED", Message: "this return link has expired with your entry", Status: http.StatusForbidden}
	ErrLinkWrongRoom = &waitroom.Error{Code: "RETURN_LINK_WRONG_ROOM", Message: "this return link is for another room", Status: http.StatusForbidden}
	ErrLinkUsed      = waitroom.ErrReturnLinkUsed
)

// MinLinkSecret is the shortest key a Linker accepts: as many bytes as
// its MAC has.
const MinLinkSecret = 32

// linkContext keeps these MACs apart from anything else the same secret
// signs (the visitor cookies).
const linkContext = "waitroom return link v1\x00"

// maxLink bounds what Open reads: a room, a user id, a nonce and a time.
const maxLink = 512

var linkEncoding = base64.RawURLEncoding.Strict()

// Link is what a return link says: whose place in which room it restores,
// once (Nonce, kept by the store), until Expires (the token's end).
type Link struct {
	Room, User, Nonce string
	Expires           time.Time
}

// Linker signs and opens return links (HMAC-SHA256).
type Linker struct {
	Key []byte
	Now func() time.Time // nil: time.Now
}

// NewNonce returns a fresh single-use nonce: 128 random bits.
func NewNonce() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return linkEncoding.EncodeToString(b[:])
}

// Sign returns l as the link's value: payload "." MAC, base64url.
func (k *Linker) Sign(l Link) string {
	var p bytes.Buffer
	for _, f := range []string{l.Room, l.User, l.Nonce} {
		p.WriteString(f)
		p.WriteByte(0)
	}
	p.Write(binary.BigEndian.AppendUint64(nil, uint64(l.Expires.UnixMilli())))
	payload := linkEncoding.EncodeToString(p.Bytes())
	return payload + "." + k.mac(payload)
}

func (k *Linker) mac(payload string) string {
	m := hmac.New(sha256.New, k.Key)
	m.Write([]byte(linkContext))
	m.Write([]byte(payload))
	return linkEncoding.EncodeToString(m.Sum(nil))
}

// Open checks a link's value for room: ErrLinkInvalid when it is not
// one this key signed (forged, altered, truncated), ErrLinkWrongRoom when
// it is another room's, ErrLinkExpired past its time. Whether it was used
// already only the store knows (NoticeStore.UseReturnLink).
func (k *Linker) Open(value, room string) (Link, error) {
	payload, mac, ok := strings.Cut(value, ".")
	if !ok || len(value) > maxLink || !hmac.Equal([]byte(mac), []byte(k.mac(payload))) {
		return Link{}, ErrLinkInvalid
	}
	raw, err := linkEncoding.DecodeString(payload)
	if err != nil {
		return Link{}, ErrLinkInvalid
	}
	fields := bytes.SplitN(raw, []byte{0}, 4)
	if len(fields) != 4 || len(fields[3]) != 8 {
		return Link{}, ErrLinkInvalid
	}
	l := Link{Room: string(fields[0]), User: string(fields[1]), Nonce: string(fields[2]),
		Expires: time.UnixMilli(int64(binary.BigEndian.Uint64(fields[3])))}
	if !waitroom.ValidRoomName(l.Room) || !waitroom.ValidUserID(l.User) || l.Nonce == "" {
		return Link{}, ErrLinkInvalid
	}
	if l.Room != room {
		return Link{}, ErrLinkWrongRoom
	}
	if !k.now().Before(l.Expires) {
		return Link{}, ErrLinkExpired
	}
	return l, nil
}

func (k *Linker) now() time.Time {
	if k.Now != nil {
		return k.Now()
	}
	return time.Now()
}
