package redisstore_test

import (
	"cmp"
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/redisstore"
)

// A room's whole journey: enter, admission, claim at the gate, and a
// completed order.
func Example() {
	ctx := context.Background()
	client, err := redisstore.Open(cmp.Or(os.Getenv("REDIS_URL"), "redis://127.0.0.1:6379/0"))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	prefix := fmt.Sprintf("example-%d", time.Now().UnixNano())
	store := redisstore.New(client, redisstore.Options{Prefix: prefix})
	defer func() { // tidy up the example's keys
		keys, _ := client.Keys(ctx, prefix+":*").Result()
		client.Del(ctx, keys...)
	}()

	if _, err := store.CreateRoom(ctx, "sale", waitroom.RoomConfig{Rate: 140}); err != nil {
		log.Fatal(err)
	}
	for _, user := range []string{"alice", "bob"} {
		st, err := store.Enter(ctx, "sale", user)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(user, st.State, st.Position)
	}

	// The admitter ticks every slice; the first tick starts the bucket.
	var admitted []waitroom.Admission
	for len(admitted) < 2 {
		got, err := store.Admit(ctx, "sale")
		if err != nil {
			log.Fatal(err)
		}
		admitted = append(admitted, got...)
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Println("admitted", admitted[0].User, admitted[1].User)

	// The gate: claim, place the order, complete.
	hold, err := store.Claim(ctx, "sale", "alice", admitted[0].Token)
	if err != nil {
		log.Fatal(err)
	}
	_, err = store.Claim(ctx, "sale", "alice", admitted[0].Token)
	fmt.Println("second claim:", waitroom.ErrorCode(err))
	if err := store.Complete(ctx, hold); err != nil {
		log.Fatal(err)
	}
	stats, err := store.Stats(ctx, "sale")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("admitted %d, completed %d, active %d\n", stats.Admitted, stats.Completed, stats.Active)
	// Output:
	// alice waiting 1
	// bob waiting 2
	// admitted alice bob
	// second claim: TOKEN_IN_USE
	// admitted 2, completed 1, active 1
}
