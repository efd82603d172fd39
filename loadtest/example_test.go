package loadtest_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/loadtest"
	"github.com/waitroom/waitroom/memstore"
	"github.com/waitroom/waitroom/server"
	"github.com/waitroom/waitroom/shop"
	"github.com/waitroom/waitroom/shop/inmem"
)

// A run against the whole system in process: the waiting room on memstore,
// its admitter feeding the report's admission times, and the reference
// shop behind the gate.
func ExampleRun() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	store := memstore.New(memstore.Options{})
	if _, err := store.CreateRoom(ctx, "default", waitroom.RoomConfig{Rate: 500}); err != nil {
		panic(err)
	}
	orders := inmem.New()
	if err := orders.CreateProduct(ctx, shop.Product{ID: "flash-1", Name: "Flash sale item", Stock: 1000}); err != nil {
		panic(err)
	}
	srv, err := server.New(server.Config{Store: store, Protected: shop.NewHandler(orders, shop.Options{})})
	if err != nil {
		panic(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()

	var admissions loadtest.AdmissionRecorder
	go (&waitroom.Admitter{Store: store, OnAdmit: admissions.OnAdmit}).Run(ctx)

	rep, err := loadtest.Run(ctx, loadtest.Config{
		URL:          ts.URL,
		Users:        2000,
		NoOrderShare: 0.1,
		ProductID:    "flash-1",
		Rate:         500,
		Stock:        1000,
		Admissions:   &admissions,
		Out:          os.Stderr,
	})
	if rep != nil {
		_ = rep.WriteText(os.Stdout)
	}
	if err != nil {
		fmt.Println(err) // a command exits non-zero here
	}
}
