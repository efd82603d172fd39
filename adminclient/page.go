package adminclient

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/adminapi"
)

// SetPage gives room a page of its own: archive is a zip of what a
// --page-dir holds (ZipPageDir makes one).
func (c *Client) SetPage(ctx context.Context, room string, archive []byte) (adminapi.Room, []byte, error) {
	raw, err := c.Send(ctx, http.MethodPut, roomPath(room)+"/page", "application/zip", archive)
	return decodeRoom(raw, err)
}

// ClearPage gives room the instance's page again.
func (c *Client) ClearPage(ctx context.Context, room string) (adminapi.Room, []byte, error) {
	return callFor[adminapi.Room](ctx, c, http.MethodDelete, roomPath(room)+"/page", nil)
}

// Page is room's own page archive, as stored.
func (c *Client) Page(ctx context.Context, room string) ([]byte, error) {
	return c.Send(ctx, http.MethodGet, roomPath(room)+"/page", "", nil)
}

func decodeRoom(raw []byte, err error) (room adminapi.Room, _ []byte, _ error) {
	if err != nil {
		return room, nil, err
	}
	if err := json.Unmarshal(raw, &room); err != nil {
		return room, raw, fmt.Errorf("reading the server's answer: %w", err)
	}
	return room, raw, nil
}

// ZipPageDir packs a page directory as the server reads it: its files by
// their paths under dir, dotfiles left out (the server would pass over
// them anyway); at most waitroom.MaxPageBytes. The server checks what is
// inside.
func ZipPageDir(dir string) ([]byte, error) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil || rel == "." {
			return err
		}
		if strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s: not a regular file", path)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		w, err := zw.Create(filepath.ToSlash(rel))
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("page directory: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	if buf.Len() > waitroom.MaxPageBytes {
		return nil, fmt.Errorf("page directory %s packs to %d bytes; a room's page is at most %d KB", dir, buf.Len(), waitroom.MaxPageBytes>>10)
	}
	return buf.Bytes(), nil
}
