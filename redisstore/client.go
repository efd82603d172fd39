package redisstore

import "github.com/redis/go-redis/v9"

// Client is the Redis client the Store runs on, for the parts that keep
// keys of their own beside the rooms' (the webhooks' log).
func (s *Store) Client() redis.UniversalClient { return s.client }

// Prefix is the key prefix of the Store.
func (s *Store) Prefix() string { return s.prefix }
