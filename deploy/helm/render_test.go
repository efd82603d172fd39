package helm

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
)

const (
	chartDir    = "waitroom"
	releaseName = "shop"
	namespace   = "sale"
)

// valueSets are the values the chart is linted and rendered with: its
// defaults alone, and each file of testdata on top of them.
var valueSets = map[string][]string{
	"default":         nil,
	"sentinel-hpa":    {filepath.Join("testdata", "sentinel-hpa.yaml")},
	"existing-secret": {filepath.Join("testdata", "existing-secret.yaml")},
}

// decoder decodes YAML strictly into the Kubernetes API types: an unknown
// or duplicated field, or a field in the wrong case, is an error, as the
// API server's strict field validation makes it.
var decoder = func() runtime.Decoder {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, policyv1.AddToScheme,
		autoscalingv2.AddToScheme, monitoringv1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
	return kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme, scheme,
		kjson.SerializerOptions{Yaml: true, Strict: true})
}()

// manifests is one render, its objects decoded by kind and name.
type manifests struct {
	deployments     map[string]*appsv1.Deployment
	services        map[string]*corev1.Service
	configMaps      map[string]*corev1.ConfigMap
	secrets         map[string]*corev1.Secret
	pdbs            map[string]*policyv1.PodDisruptionBudget
	hpas            map[string]*autoscalingv2.HorizontalPodAutoscaler
	serviceMonitors map[string]*monitoringv1.ServiceMonitor
	// docs is the text of every object, by "Kind/name".
	docs map[string]string
}

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("loading the chart: %v", err)
	}
	return c
}

// mergedValues layers the values files and then the YAML overrides, each
// winning over what came before, as helm's -f does; the chart's own
// values.yaml is underneath them all at render.
func mergedValues(t *testing.T, files []string, overrides ...string) map[string]any {
	t.Helper()
	vals := map[string]any{}
	layer := func(name string, data []byte) {
		v, err := chartutil.ReadValues(data)
		if err != nil {
			t.Fatalf("values %s: %v", name, err)
		}
		vals = chartutil.CoalesceTables(v.AsMap(), vals)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		layer(f, data)
	}
	for i, o := range overrides {
		layer(fmt.Sprintf("override %d", i), []byte(o))
	}
	return vals
}

// renderText renders the chart as helm install does: values checked
// against values.schema.json, then every template. It returns the
// manifests by template file.
func renderText(t *testing.T, vals map[string]any) (map[string]string, error) {
	t.Helper()
	c := loadChart(t)
	rv, err := chartutil.ToRenderValuesWithSchemaValidation(c, vals,
		chartutil.ReleaseOptions{Name: releaseName, Namespace: namespace, Revision: 1, IsInstall: true},
		chartutil.DefaultCapabilities, false)
	if err != nil {
		return nil, err
	}
	return engine.Render(c, rv)
}

// render renders and decodes every object strictly; any error fails t.
func render(t *testing.T, files []string, overrides ...string) manifests {
	t.Helper()
	out, err := renderText(t, mergedValues(t, files, overrides...))
	if err != nil {
		t.Fatalf("rendering: %v", err)
	}
	m, err := decodeAll(out)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func decodeAll(out map[string]string) (manifests, error) {
	m := manifests{
		deployments: map[string]*appsv1.Deployment{}, services: map[string]*corev1.Service{},
		configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{},
		pdbs: map[string]*policyv1.PodDisruptionBudget{}, hpas: map[string]*autoscalingv2.HorizontalPodAutoscaler{},
		serviceMonitors: map[string]*monitoringv1.ServiceMonitor{}, docs: map[string]string{},
	}
	files := make([]string, 0, len(out))
	for f := range out {
		files = append(files, f)
	}
	sort.Strings(files)
	for _, file := range files {
		if strings.HasSuffix(file, "NOTES.txt") {
			continue
		}
		for _, doc := range releaseutil.SplitManifests(out[file]) {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			obj, gvk, err := decoder.Decode([]byte(doc), nil, nil)
			if err != nil {
				return m, fmt.Errorf("%s: strict decoding: %w\n%s", file, err, doc)
			}
			var name string
			switch o := obj.(type) {
			case *appsv1.Deployment:
				name = put(m.deployments, o.Name, o)
			case *corev1.Service:
				name = put(m.services, o.Name, o)
			case *corev1.ConfigMap:
				name = put(m.configMaps, o.Name, o)
			case *corev1.Secret:
				name = put(m.secrets, o.Name, o)
			case *policyv1.PodDisruptionBudget:
				name = put(m.pdbs, o.Name, o)
			case *autoscalingv2.HorizontalPodAutoscaler:
				name = put(m.hpas, o.Name, o)
			case *monitoringv1.ServiceMonitor:
				name = put(m.serviceMonitors, o.Name, o)
			default:
				return m, fmt.Errorf("%s: a %s the tests do not check", file, gvk)
			}
			key := gvk.Kind + "/" + name
			if _, dup := m.docs[key]; dup {
				return m, fmt.Errorf("%s rendered twice", key)
			}
			m.docs[key] = doc
		}
	}
	return m, nil
}

// put files o under name and returns the name.
func put[T any](objs map[string]T, name string, o T) string {
	objs[name] = o
	return name
}

// stripComments drops whole-line YAML comments, which a template leaves
// behind when its object is switched off.
func stripComments(doc string) string {
	var b strings.Builder
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// the returns the one object of a kind, failing t unless there is exactly one.
func the[T any](t *testing.T, kind string, objs map[string]T) T {
	t.Helper()
	if len(objs) != 1 {
		t.Fatalf("%d %s objects, want 1", len(objs), kind)
	}
	for _, o := range objs {
		return o
	}
	panic("unreachable")
}

// envSource is where a container's environment variable comes from.
type envSource struct {
	value string
	// literal: written in the Deployment itself.
	literal bool
	// secret, key: a secretKeyRef, resolved when the Secret was rendered.
	secret, key string
	optional    bool
	resolved    bool
	// configMap: from a rendered ConfigMap.
	configMap string
}

// containerEnv resolves the environment the container starts with.
// Variables from env override those from envFrom, as the kubelet does.
func containerEnv(t *testing.T, m manifests, c corev1.Container) map[string]envSource {
	t.Helper()
	env := map[string]envSource{}
	for _, from := range c.EnvFrom {
		if from.ConfigMapRef == nil || from.Prefix != "" {
			t.Fatalf("envFrom %+v: want a plain configMapRef", from)
		}
		cm, ok := m.configMaps[from.ConfigMapRef.Name]
		if !ok {
			t.Fatalf("envFrom names ConfigMap %q, which is not rendered", from.ConfigMapRef.Name)
		}
		for k, v := range cm.Data {
			env[k] = envSource{value: v, resolved: true, configMap: cm.Name}
		}
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = envSource{value: e.Value, literal: true, resolved: true}
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			src := envSource{secret: ref.Name, key: ref.Key, optional: ref.Optional != nil && *ref.Optional}
			if s, ok := m.secrets[ref.Name]; ok {
				v, ok := s.Data[ref.Key]
				if !ok {
					t.Fatalf("%s reads key %q of the chart's Secret %s, which has no such key", e.Name, ref.Key, ref.Name)
				}
				src.value, src.resolved = string(v), true
			}
			env[e.Name] = src
		default:
			t.Fatalf("%s: a valueFrom the tests do not resolve: %+v", e.Name, e.ValueFrom)
		}
	}
	return env
}

// waitroomContainer is the Deployment's one container.
func waitroomContainer(t *testing.T, d *appsv1.Deployment) corev1.Container {
	t.Helper()
	cs := d.Spec.Template.Spec.Containers
	if len(cs) != 1 || cs[0].Name != "waitroom" {
		t.Fatalf("containers %v, want the one named waitroom", cs)
	}
	return cs[0]
}

func TestStrictDecodingRefusesAnUnknownField(t *testing.T) {
	// The decoder every render goes through must fail on what the API
	// server would refuse, or the strict checks above check nothing.
	for name, doc := range map[string]string{
		"unknown field": "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec:\n  selectr: {a: b}\n",
		"wrong case":    "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec:\n  Selector: {a: b}\n",
		"duplicate":     "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec:\n  type: ClusterIP\n  type: NodePort\n",
		"misplaced":     "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n  template:\n    spec:\n      readOnlyRootFilesystem: true\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := decodeAll(map[string]string{"t.yaml": doc})
			if err == nil || !runtime.IsStrictDecodingError(errors.Unwrap(err)) {
				t.Fatalf("decoded %q with error %v, want a strict decoding error", doc, err)
			}
		})
	}
	if _, err := decodeAll(map[string]string{"t.yaml": "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec:\n  selector: {a: b}\n"}); err != nil {
		t.Fatalf("a valid Service: %v", err)
	}
}

// dockerfileUser is the uid and gid the root Dockerfile's final stages run
// as: the chart must run the image as the same user.
func dockerfileUser(t *testing.T) (uid, gid int64) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var users []string
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "USER" {
			users = append(users, f[1])
		}
	}
	if len(users) == 0 {
		t.Fatal("the Dockerfile sets no USER")
	}
	for _, u := range users[1:] {
		if u != users[0] {
			t.Fatalf("the Dockerfile's stages run as %v: want one user", users)
		}
	}
	if _, err := fmt.Sscanf(users[0], "%d:%d", &uid, &gid); err != nil {
		t.Fatalf("Dockerfile USER %q: want numeric uid:gid: %v", users[0], err)
	}
	return uid, gid
}

// yamlDocs is every rendered object but the Secrets, as text.
func (m manifests) nonSecretText() string {
	var b bytes.Buffer
	for key, doc := range m.docs {
		if !strings.HasPrefix(key, "Secret/") {
			b.WriteString(doc + "\n")
		}
	}
	return b.String()
}
