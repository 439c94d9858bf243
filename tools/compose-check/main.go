// compose-check loads a Compose file with compose-go, the Compose Specification's reference loader (the one
// `docker compose config` uses), so the project's docker-compose.yml is validated against the specification
// itself where no Docker engine runs: schema validation, interpolation, normalization and the consistency checks
// (depends_on targets, volumes, networks). It prints the resolved project's services, or the loader's error.
//
// Usage: go run ./tools/compose-check [-q] [FILE]   (FILE defaults to docker-compose.yml)
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

// load reads one Compose file the way `docker compose -f FILE config` does, except that the environment is the
// empty one: the file must be valid without any variable from the caller's shell.
func load(ctx context.Context, file string) (*types.Project, error) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, err
	}
	opts, err := cli.NewProjectOptions(
		[]string{abs},
		cli.WithWorkingDirectory(filepath.Dir(abs)),
		cli.WithConsistency(true),
		cli.WithResolvedPaths(true),
		cli.WithInterpolation(true),
		cli.WithNormalization(true),
	)
	if err != nil {
		return nil, err
	}
	return opts.LoadProject(ctx)
}

func main() {
	quiet := flag.Bool("q", false, "print nothing on success (like docker compose config -q)")
	flag.Parse()
	file := "docker-compose.yml"
	if flag.NArg() > 0 {
		file = flag.Arg(0)
	}
	project, err := load(context.Background(), file)
	if err != nil {
		fmt.Fprintf(os.Stderr, "compose-check: %s: %v\n", file, err)
		os.Exit(1)
	}
	if *quiet {
		return
	}
	names := project.ServiceNames()
	sort.Strings(names)
	fmt.Printf("compose-check: %s: project %q valid, %d services: %v\n", file, project.Name, len(names), names)
}
