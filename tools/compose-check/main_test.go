package main

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// The repository's compose file, loaded as `docker compose config` would load it.
func TestRepositoryComposeFileIsValidBySpecification(t *testing.T) {
	project, err := load(context.Background(), filepath.Join("..", "..", "docker-compose.yml"))
	if err != nil {
		t.Fatalf("docker-compose.yml is not a valid Compose file: %v", err)
	}
	if project.Name != "dkg" {
		t.Errorf("project name = %q, want the top-level name: dkg", project.Name)
	}
	got := project.ServiceNames()
	sort.Strings(got)
	want := []string{"consumer-dkg", "consumer-hash", "grafana", "init", "kafka", "loadgen-dkg", "loadgen-hash",
		"prometheus", "sampler", "sampler-hash"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("services = %v, want %v", got, want)
	}
	for name, svc := range project.Services {
		// The file promises loopback-only host ports.
		for _, port := range svc.Ports {
			if port.Published != "" && port.HostIP != "127.0.0.1" {
				t.Errorf("service %s publishes %s on %q, not on 127.0.0.1", name, port.Published, port.HostIP)
			}
		}
		if svc.Image == "" {
			t.Errorf("service %s has no image", name)
		} else if !strings.Contains(svc.Image, ":") || strings.HasSuffix(svc.Image, ":latest") {
			t.Errorf("service %s: image %q is not pinned to a tag", name, svc.Image)
		}
		if svc.Build != nil {
			if _, err := os.Stat(filepath.Join(svc.Build.Context, svc.Build.Dockerfile)); err != nil {
				t.Errorf("service %s builds from a missing Dockerfile: %v", name, err)
			}
		}
		// Normalization resolved every dependency to an existing service (consistency check).
		for dep := range svc.DependsOn {
			if _, ok := project.Services[dep]; !ok {
				t.Errorf("service %s depends on unknown service %s", name, dep)
			}
		}
	}
}

// The checker must fail on files the specification rejects, or the test above proves nothing.
func TestLoaderRejectsFilesTheSpecificationRejects(t *testing.T) {
	cases := []struct {
		name, file, wantErr string
	}{
		{"unknown top-level key", "services:\n  a:\n    image: busybox:1\nservice_typo: {}\n", "service_typo"},
		{"unknown service key", "services:\n  a:\n    image: busybox:1\n    imagee: x\n", "imagee"},
		{"depends_on a missing service", "services:\n  a:\n    image: busybox:1\n    depends_on: [b]\n", "b"},
		{"invalid port", "services:\n  a:\n    image: busybox:1\n    ports: [\"127.0.0.1:99999:80\"]\n", "99999"},
		{"invalid duration", "services:\n  a:\n    image: busybox:1\n    healthcheck:\n      interval: soon\n", "soon"},
		{"undefined named volume", "services:\n  a:\n    image: busybox:1\n    volumes: [\"data:/data\"]\n", "data"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "compose.yml")
			if err := os.WriteFile(file, []byte("name: t\n"+tc.file), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := load(context.Background(), file)
			if err == nil {
				t.Fatalf("loaded without error:\n%s", tc.file)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %q does not name %q", err, tc.wantErr)
			}
		})
	}
}
