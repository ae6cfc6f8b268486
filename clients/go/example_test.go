package coderun_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"

	coderun "github.com/coderun-rpc/coderun-rpc/clients/go"
)

// Start finds the daemon ($CODERUN_RPC_BIN, else coderun-rpc on PATH), runs
// a program and reads its value as the daemon sent it.
func ExampleStart() {
	ctx := context.Background()
	client, err := coderun.Start(ctx, coderun.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	res, err := client.Run(ctx, "return {'sum': sum(range(10)), 'big': 2**60}", nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(res.Value))
	// Output: {"sum":45,"big":1152921504606846976}
}

// A failing program is an error value carrying the failure's kind.
func ExampleRunError() {
	ctx := context.Background()
	client, err := coderun.Start(ctx, coderun.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	_, err = client.Run(ctx, "return {}['missing']", nil)
	var runErr *coderun.RunError
	if errors.As(err, &runErr) {
		fmt.Println(runErr.Kind, runErr.ExceptionType, runErr.Line)
	}
	// Output: exception KeyError 1
}

type weatherArgs struct {
	City string `json:"city" jsonschema:"the city's name"`
	Days int    `json:"days,omitempty"`
}

type forecast struct {
	City  string    `json:"city"`
	Highs []float64 `json:"highs"`
}

// Typed declares a Go function to the program: its schemas come from the Go
// types, the program calls it like a Python function, and Describe shows the
// stub a model reads first.
func ExampleTyped() {
	ctx := context.Background()
	client, err := coderun.Start(ctx, coderun.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	weather, err := coderun.Typed("forecast", "The daily highs of a city.",
		func(_ context.Context, in weatherArgs) (forecast, error) {
			return forecast{City: in.City, Highs: []float64{21.5, 19}[:max(1, min(in.Days, 2))]}, nil
		})
	if err != nil {
		log.Fatal(err)
	}
	bindings := []coderun.Binding{{Global: "weather", Functions: []coderun.Function{weather}}}

	res, err := client.Run(ctx, `f = await weather.forecast("Oslo", days=2)
return max(f["highs"])`, &coderun.RunOptions{Bindings: bindings})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(res.Value))
	// Output: 21.5
}

// A session keeps the interpreter's state across runs; a fork starts from
// that state and diverges.
func ExampleSession_Fork() {
	ctx := context.Background()
	client, err := coderun.Start(ctx, coderun.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	s, err := client.OpenSession(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close(ctx)
	if _, err := s.Run(ctx, "rows = [1, 2]", nil); err != nil {
		log.Fatal(err)
	}
	f, err := s.Fork(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close(ctx)
	if _, err := f.Run(ctx, "rows.append(3)", nil); err != nil {
		log.Fatal(err)
	}
	for _, x := range []*coderun.Session{s, f} {
		res, err := x.Run(ctx, "return rows", nil)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(string(res.Value))
	}
	// Output:
	// [1,2]
	// [1,2,3]
}

// Untyped passes the program's one argument through as raw JSON.
func ExampleUntyped() {
	ctx := context.Background()
	client, err := coderun.Start(ctx, coderun.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	search := coderun.Untyped("search", func(_ context.Context, args json.RawMessage) (any, error) {
		var q struct{ Q string }
		if err := json.Unmarshal(args, &q); err != nil {
			return nil, err
		}
		return []string{q.Q + "-1", q.Q + "-2"}, nil
	})
	res, err := client.Run(ctx, "return await tools.search(q='go')", &coderun.RunOptions{
		Bindings: []coderun.Binding{{Global: "tools", Functions: []coderun.Function{search}}},
		OnLog:    func(ev coderun.LogEvent) { fmt.Println("log:", ev.Text) },
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(res.Value))
	// Output: ["go-1","go-2"]
}
