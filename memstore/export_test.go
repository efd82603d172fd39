package memstore

// ReplaceSeed writes seedHex over room's draw seed behind the Store's
// back, as an insider with access to the process could: the tampering the
// draw's own checks must catch (storetest's DrawSeedReplaced).
func ReplaceSeed(s *Store, room, seedHex string) {
	s.mu.RLock()
	r := s.rooms[room]
	s.mu.RUnlock()
	r.mu.Lock()
	r.draw.seed = seedHex
	r.mu.Unlock()
}
