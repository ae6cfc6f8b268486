// Package validate checks deploy/kubernetes: every manifest decodes strictly
// (an unknown or misspelt field fails) into the Kubernetes API's own Go
// types, and the pieces fit together (probes on the admin port, the drain
// within the grace period, selectors that match). It is a module of its own
// so the daemon's module does not depend on the Kubernetes API.
package validate

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

// decode reads ../name strictly into v.
func decode(t *testing.T, name string, v any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

func TestEveryManifestDecodesStrictly(t *testing.T) {
	names, _ := filepath.Glob("../*.yaml")
	want := map[string]any{
		"deployment.yaml": &appsv1.Deployment{}, "service.yaml": &corev1.Service{},
		"hpa.yaml": &autoscalingv2.HorizontalPodAutoscaler{}, "pdb.yaml": &policyv1.PodDisruptionBudget{},
	}
	if len(names) != len(want) {
		t.Errorf("manifests %v, want exactly %d (add new ones to this test)", names, len(want))
	}
	for name, v := range want {
		decode(t, name, v)
	}
}

// TestStrictDecodingRefusesUnknownFields: the check above can fail.
func TestStrictDecodingRefusesUnknownFields(t *testing.T) {
	var d appsv1.Deployment
	err := yaml.UnmarshalStrict([]byte("apiVersion: apps/v1\nkind: Deployment\nspec:\n  replica: 3\n"), &d)
	if err == nil || !strings.Contains(err.Error(), "replica") {
		t.Errorf("a misspelt field: %v, want an error naming it", err)
	}
}

func TestDeploymentFitsTogether(t *testing.T) {
	var d appsv1.Deployment
	decode(t, "deployment.yaml", &d)
	var svc corev1.Service
	decode(t, "service.yaml", &svc)
	var hpa autoscalingv2.HorizontalPodAutoscaler
	decode(t, "hpa.yaml", &hpa)
	var pdb policyv1.PodDisruptionBudget
	decode(t, "pdb.yaml", &pdb)

	labels := d.Spec.Template.Labels
	for what, sel := range map[string]map[string]string{"deployment": d.Spec.Selector.MatchLabels,
		"service": svc.Spec.Selector, "pdb": pdb.Spec.Selector.MatchLabels} {
		for k, v := range sel {
			if labels[k] != v {
				t.Errorf("%s selector %s=%s does not match the pod template", what, k, v)
			}
		}
	}
	if hpa.Spec.ScaleTargetRef.Kind != "Deployment" || hpa.Spec.ScaleTargetRef.Name != d.Name {
		t.Errorf("the HPA scales %s/%s, not the Deployment", hpa.Spec.ScaleTargetRef.Kind, hpa.Spec.ScaleTargetRef.Name)
	}

	c := d.Spec.Template.Spec.Containers[0]
	if !slices.Equal(c.Args[:1], []string{"serve"}) || !slices.Contains(c.Args, "--admin") {
		t.Errorf("args %v: want serve with --listen and --admin", c.Args)
	}
	for probe, path := range map[*corev1.Probe]string{c.LivenessProbe: "/healthz", c.ReadinessProbe: "/readyz", c.StartupProbe: "/healthz"} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != path || probe.HTTPGet.Port.String() != "admin" {
			t.Errorf("probe %+v: want GET %s on the admin port", probe, path)
		}
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["admin"] == 0 || ports["rpc"] == 0 || svc.Spec.Ports[0].TargetPort.String() != "rpc" {
		t.Errorf("ports %v, service target %s: want rpc and admin, the service on rpc", ports, svc.Spec.Ports[0].TargetPort.String())
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	if tok := env["CODERUN_AUTH_TOKEN"]; tok.ValueFrom == nil || tok.ValueFrom.SecretKeyRef == nil {
		t.Error("CODERUN_AUTH_TOKEN must come from a Secret (the listener is off loopback)")
	}
	drainMs, err := strconv.ParseInt(env["CODERUN_DRAIN_MS"].Value, 10, 64)
	if grace := d.Spec.Template.Spec.TerminationGracePeriodSeconds; err != nil || grace == nil || *grace*1000 < drainMs+10000 {
		t.Errorf("terminationGracePeriodSeconds %v must exceed CODERUN_DRAIN_MS (%d, %v) by at least 10 s", grace, drainMs, err)
	}
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Exec == nil ||
		!strings.Contains(strings.Join(c.Lifecycle.PreStop.Exec.Command, " "), "kill -TERM 1") {
		t.Error("preStop must start the drain (SIGTERM to the daemon) and wait for it")
	}
	sc := c.SecurityContext
	if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil ||
		!slices.Contains(sc.Capabilities.Drop, "ALL") || c.Resources.Limits.Memory().IsZero() || c.Resources.Requests.Cpu().IsZero() {
		t.Errorf("security context %+v / resources %+v: want no privilege escalation, all capabilities dropped, cpu requests and memory limits", sc, c.Resources)
	}
}
