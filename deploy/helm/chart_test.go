package helm

import (
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// secretEnv are the variables of serve that hold a secret (or a URL that
// may carry a password): they must come from a Secret, never a literal or
// a ConfigMap.
var secretEnv = []string{"REDIS_URL", "WAITROOM_COOKIE_SECRET", "WAITROOM_ADMIN_TOKEN", "WAITROOM_SETTLE_SECRET", "DATABASE_URL", "AMQP_URL"}

func TestLint(t *testing.T) {
	for name, files := range valueSets {
		t.Run(name, func(t *testing.T) {
			linter := lint.AllWithKubeVersionAndSchemaValidation(chartDir, mergedValues(t, files), namespace, nil, false)
			if len(linter.Messages) == 0 {
				t.Fatal("helm lint said nothing: it did not run")
			}
			for _, msg := range linter.Messages {
				// INFO is "icon is recommended" and the like; a warning or
				// an error fails, as helm lint --strict does.
				if msg.Severity >= support.WarningSev {
					t.Errorf("helm lint: %s", msg)
				}
			}
		})
	}
}

func TestRenderedObjects(t *testing.T) {
	for name, files := range valueSets {
		t.Run(name, func(t *testing.T) {
			m := render(t, files)
			kinds := map[string]int{}
			for key := range m.docs {
				kinds[strings.Split(key, "/")[0]]++
			}
			want := map[string]int{"ConfigMap": 1, "Deployment": 1, "PodDisruptionBudget": 1, "Service": 1, "Secret": 1}
			switch name {
			case "sentinel-hpa":
				want["HorizontalPodAutoscaler"], want["ServiceMonitor"] = 1, 1
			case "existing-secret":
				delete(want, "Secret")
			}
			if !maps.Equal(kinds, want) {
				t.Fatalf("rendered %v, want %v", kinds, want)
			}
			checkDeployment(t, m)
			checkService(t, m)
			checkPDB(t, m)
			checkSecretsStaySecret(t, m)
		})
	}
}

// checkDeployment is what a reviewer looks for in the pods: at least two,
// probes on the right paths, resources, the image's non-root user, a
// read-only root and no capability, spread over nodes.
func checkDeployment(t *testing.T, m manifests) {
	t.Helper()
	d := the(t, "Deployment", m.deployments)
	pod := d.Spec.Template.Spec
	c := waitroomContainer(t, d)

	if len(m.hpas) == 0 {
		if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
			t.Errorf("replicas %v, want at least 2", d.Spec.Replicas)
		}
	} else {
		hpa := the(t, "HorizontalPodAutoscaler", m.hpas)
		if d.Spec.Replicas != nil {
			t.Errorf("replicas %d set beside an HPA, which then fights the chart", *d.Spec.Replicas)
		}
		if ref := hpa.Spec.ScaleTargetRef; ref.Kind != "Deployment" || ref.APIVersion != "apps/v1" || ref.Name != d.Name {
			t.Errorf("the HPA scales %+v, want Deployment %s", ref, d.Name)
		}
		if hpa.Spec.MinReplicas == nil || *hpa.Spec.MinReplicas < 2 || hpa.Spec.MaxReplicas < *hpa.Spec.MinReplicas {
			t.Errorf("HPA replicas %v..%d, want at least 2", hpa.Spec.MinReplicas, hpa.Spec.MaxReplicas)
		}
	}
	if got := labels.SelectorFromSet(d.Spec.Selector.MatchLabels); len(d.Spec.Selector.MatchLabels) == 0 || !got.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("selector %v does not select the pods' labels %v", d.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
	}
	if ru := d.Spec.Strategy.RollingUpdate; ru == nil || ru.MaxUnavailable == nil || ru.MaxUnavailable.IntValue() != 0 {
		t.Errorf("rolling update %+v: want maxUnavailable 0, so a rollout never runs below the count", ru)
	}

	// Probes: liveness on /healthz (a Redis outage must not restart the
	// pods), readiness on /readyz, both on the http port.
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s probe %+v: want an HTTP GET", p.name, p.probe)
			continue
		}
		if g := p.probe.HTTPGet; g.Path != p.path || g.Port != intstr.FromString("http") {
			t.Errorf("%s probe GETs %s on %s, want %s on http", p.name, g.Path, g.Port.String(), p.path)
		}
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	env := containerEnv(t, m, c)
	if addr := env["WAITROOM_ADDR"].value; addr != fmt.Sprintf(":%d", ports["http"]) {
		t.Errorf("WAITROOM_ADDR %q, but the http port is %d", addr, ports["http"])
	}

	if r := c.Resources; r.Requests.Cpu().IsZero() || r.Requests.Memory().IsZero() || r.Limits.Memory().IsZero() {
		t.Errorf("resources %+v: want cpu and memory requests and a memory limit", r)
	}

	uid, gid := dockerfileUser(t)
	psc, sc := pod.SecurityContext, c.SecurityContext
	if psc == nil || sc == nil {
		t.Fatalf("securityContext: pod %+v, container %+v", psc, sc)
	}
	if psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != uid || psc.RunAsGroup == nil || *psc.RunAsGroup != gid {
		t.Errorf("pod securityContext %+v: want non-root as the Dockerfile's %d:%d", psc, uid, gid)
	}
	if psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("seccomp %+v, want RuntimeDefault", psc.SeccompProfile)
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("the root filesystem is writable: the binary writes no file, so it must be read-only")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("allowPrivilegeEscalation is not false")
	}
	if sc.Privileged != nil && *sc.Privileged {
		t.Error("the container is privileged")
	}
	if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 {
		t.Errorf("capabilities %+v: want every one dropped and none added", sc.Capabilities)
	}
	if sc.RunAsUser != nil && *sc.RunAsUser == 0 {
		t.Error("the container runs as root")
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Error("the pods mount a service account token they never use")
	}

	var byHost bool
	for _, tsc := range pod.TopologySpreadConstraints {
		sel := labels.SelectorFromSet(tsc.LabelSelector.MatchLabels)
		if tsc.TopologyKey == "kubernetes.io/hostname" && tsc.MaxSkew == 1 && sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			byHost = true
		}
	}
	if !byHost {
		t.Errorf("topology spread %+v: want the pods spread over nodes", pod.TopologySpreadConstraints)
	}
}

// checkService: the Service selects the pods and names their ports.
func checkService(t *testing.T, m manifests) {
	t.Helper()
	d := the(t, "Deployment", m.deployments)
	s := the(t, "Service", m.services)
	if len(s.Spec.Selector) == 0 || !labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("Service selector %v does not select the pods %v", s.Spec.Selector, d.Spec.Template.Labels)
	}
	named := map[string]bool{}
	for _, p := range waitroomContainer(t, d).Ports {
		named[p.Name] = true
	}
	servicePorts := map[string]bool{}
	for _, p := range s.Spec.Ports {
		if p.TargetPort.Type != intstr.String || !named[p.TargetPort.StrVal] {
			t.Errorf("Service port %s targets %s, which the pods do not name", p.Name, p.TargetPort.String())
		}
		servicePorts[p.Name] = true
	}
	if !servicePorts["http"] {
		t.Error("the Service has no http port")
	}
	for _, sm := range m.serviceMonitors {
		if !labels.SelectorFromSet(sm.Spec.Selector.MatchLabels).Matches(labels.Set(s.Labels)) {
			t.Errorf("ServiceMonitor selects %v, not the Service's labels %v", sm.Spec.Selector.MatchLabels, s.Labels)
		}
		for _, ep := range sm.Spec.Endpoints {
			if !servicePorts[ep.Port] || ep.Path != "/metrics" {
				t.Errorf("ServiceMonitor scrapes %s on port %q; the Service has %v", ep.Path, ep.Port, servicePorts)
			}
		}
	}
}

// checkPDB: the budget covers the pods and lets exactly one be drained at
// a time whatever their count.
func checkPDB(t *testing.T, m manifests) {
	t.Helper()
	d := the(t, "Deployment", m.deployments)
	pdb := the(t, "PodDisruptionBudget", m.pdbs)
	if !labels.SelectorFromSet(pdb.Spec.Selector.MatchLabels).Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("PDB selects %v, not the pods %v", pdb.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
	}
	if pdb.Spec.MinAvailable != nil || pdb.Spec.MaxUnavailable == nil || *pdb.Spec.MaxUnavailable != intstr.FromInt32(1) {
		t.Errorf("PDB minAvailable %v maxUnavailable %v, want maxUnavailable 1", pdb.Spec.MinAvailable, pdb.Spec.MaxUnavailable)
	}
}

// checkSecretsStaySecret: every secret variable comes from a Secret; no
// ConfigMap holds one, no env literal is one, and no Secret value appears
// anywhere outside the Secrets, in clear or in base64.
func checkSecretsStaySecret(t *testing.T, m manifests) {
	t.Helper()
	d := the(t, "Deployment", m.deployments)
	c := waitroomContainer(t, d)
	env := containerEnv(t, m, c)
	for _, name := range secretEnv {
		src, ok := env[name]
		if !ok {
			continue
		}
		if src.secret == "" {
			t.Errorf("%s comes from %+v, not from a Secret", name, src)
		}
	}
	for _, cm := range m.configMaps {
		for _, name := range secretEnv {
			if _, ok := cm.Data[name]; ok {
				t.Errorf("ConfigMap %s holds %s", cm.Name, name)
			}
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil && e.Value != "" {
			t.Errorf("env %s=%q is a literal in the Deployment: settings go in the ConfigMap, secrets in the Secret", e.Name, e.Value)
		}
	}
	text := m.nonSecretText()
	for _, s := range m.secrets {
		for key, v := range s.Data {
			if len(v) < 8 {
				t.Errorf("Secret %s key %s holds %q: too short to be a secret", s.Name, key, v)
				continue
			}
			for _, form := range []string{string(v), base64.StdEncoding.EncodeToString(v)} {
				if strings.Contains(text, form) {
					t.Errorf("Secret %s's %s appears outside the Secret", s.Name, key)
				}
			}
		}
	}
	if d.Spec.Template.Spec.EnableServiceLinks == nil || *d.Spec.Template.Spec.EnableServiceLinks {
		t.Error("service links put every Service's address into the environment")
	}
}

func TestDefaultSecretIsRandomAndLongEnough(t *testing.T) {
	// Without a cluster to look the old Secret up in, each render makes a
	// fresh cookie secret; it must be long enough for serve.
	a := the(t, "Secret", render(t, nil).secrets)
	b := the(t, "Secret", render(t, nil).secrets)
	ca, cb := a.Data["cookie-secret"], b.Data["cookie-secret"]
	if len(ca) < 32 || len(cb) < 32 {
		t.Fatalf("cookie secrets of %d and %d bytes, want at least 32", len(ca), len(cb))
	}
	if string(ca) == string(cb) {
		t.Fatal("two renders made the same cookie secret: it is not random")
	}
	if _, ok := a.Data["admin-token"]; ok {
		t.Error("the default values turn the admin API on")
	}
}

func TestSentinelAndHPA(t *testing.T) {
	m := render(t, valueSets["sentinel-hpa"])
	d := the(t, "Deployment", m.deployments)
	env := containerEnv(t, m, waitroomContainer(t, d))
	hpa := the(t, "HorizontalPodAutoscaler", m.hpas)
	if got := env["REDIS_URL"].value; !strings.HasPrefix(got, "redis+sentinel://") {
		t.Errorf("REDIS_URL %q, want the Sentinel URL of the values file", got)
	}
	// Failing open each pod lets through 1/--instances of the share: with
	// an HPA that is the most pods that may run.
	if got := env["WAITROOM_INSTANCES"].value; got != strconv.Itoa(int(hpa.Spec.MaxReplicas)) {
		t.Errorf("WAITROOM_INSTANCES %q, want the HPA's maxReplicas %d", got, hpa.Spec.MaxReplicas)
	}
	for name, want := range map[string]string{
		// YAML numbers, lists and an unquoted timestamp, as serve reads them.
		"WAITROOM_MAX_QUEUE":          "1000000",
		"WAITROOM_MARGIN":             "0.6",
		"WAITROOM_ONE_ORDER_PER_USER": "true",
		"WAITROOM_TRUSTED_PROXIES":    "10.42.0.0/16,fd00:42::/56",
		"WAITROOM_GATED_ROUTES":       "POST /orders,POST /cart/checkout",
		"WAITROOM_OPENS_AT":           "2026-12-24T10:00:00+09:00",
		"WAITROOM_LOG_FORMAT":         "json",
	} {
		if got := env[name]; got.value != want || got.configMap == "" {
			t.Errorf("%s = %+v, want %q from the ConfigMap", name, got, want)
		}
	}
	sm := the(t, "ServiceMonitor", m.serviceMonitors)
	if sm.Labels["release"] != "prometheus" {
		t.Errorf("ServiceMonitor labels %v: want the values file's release=prometheus", sm.Labels)
	}
}

func TestExistingSecret(t *testing.T) {
	m := render(t, valueSets["existing-secret"])
	d := the(t, "Deployment", m.deployments)
	env := containerEnv(t, m, waitroomContainer(t, d))
	for name, want := range map[string]envSource{
		"REDIS_URL":               {secret: "shop-redis", key: "url"},
		"WAITROOM_COOKIE_SECRET":  {secret: "shop-waitroom", key: "cookie-secret"},
		"WAITROOM_ADMIN_TOKEN":    {secret: "shop-waitroom", key: "admin-token", optional: true},
		"WAITROOM_SETTLE_SECRET":  {secret: "shop-waitroom", key: "settle-secret", optional: true},
		"DATABASE_URL":            {secret: "shop-waitroom", key: "database-url", optional: true},
		"AMQP_URL":                {secret: "shop-waitroom", key: "amqp-url", optional: true},
		"WAITROOM_WEBHOOK_SECRET": {secret: "shop-waitroom", key: "webhook-secret", optional: true},
	} {
		if got := env[name]; got != want {
			t.Errorf("%s from %+v, want %+v", name, got, want)
		}
	}
	// TLS from its own Secret, mounted whole so a renewal reaches the pod.
	var vol *corev1.Volume
	for i, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == "tls" {
			vol = &d.Spec.Template.Spec.Volumes[i]
		}
	}
	if vol == nil || vol.Secret == nil || vol.Secret.SecretName != "shop-tls" {
		t.Fatalf("volumes %+v: want the tls Secret shop-tls", d.Spec.Template.Spec.Volumes)
	}
	c := waitroomContainer(t, d)
	for _, vm := range c.VolumeMounts {
		if vm.SubPath != "" || !vm.ReadOnly {
			t.Errorf("mount %+v: want read-only and without subPath", vm)
		}
	}
	if c.ReadinessProbe.HTTPGet.Scheme != corev1.URISchemeHTTPS || c.LivenessProbe.HTTPGet.Scheme != corev1.URISchemeHTTPS {
		t.Error("serving TLS, the probes still speak plain HTTP")
	}
	if env["WAITROOM_TLS_CERT"].value != "/etc/waitroom/tls/tls.crt" || env["WAITROOM_TLS_KEY"].value != "/etc/waitroom/tls/tls.key" {
		t.Errorf("TLS files %q, %q", env["WAITROOM_TLS_CERT"].value, env["WAITROOM_TLS_KEY"].value)
	}
}

func TestRedisURLForms(t *testing.T) {
	for _, url := range []string{
		"redis://:pw@redis.data:6379/0",
		"rediss://redis.data:6380/1",
		"redis+sentinel://:pw@s1:26379,s2:26379,s3:26379/mymaster",
		"redis+cluster://h1:6379,h2:6379,h3:6379",
	} {
		m := render(t, nil, "redis: {url: '"+url+"'}")
		env := containerEnv(t, m, waitroomContainer(t, the(t, "Deployment", m.deployments)))
		if got := env["REDIS_URL"]; got.value != url || got.secret == "" {
			t.Errorf("redis.url %q: REDIS_URL %+v, want it from the Secret", url, got)
		}
	}
}

// TestRefusedValues: values the chart would deploy wrongly, or silently
// ignore, fail the render with a message naming what to change.
func TestRefusedValues(t *testing.T) {
	for _, tc := range []struct{ values, want string }{
		{"replicaCount: 1", "replicaCount"},
		{"autoscaling: {enabled: true, minReplicas: 1}", "minReplicas"},
		{"autoscaling: {enabled: true, minReplicas: 4, maxReplicas: 3}", "maxReplicas"},
		{"redis: {url: ''}", "redis.url is required"},
		{"redis: {url: 'http://redis:6379'}", "redis.url must be"},
		{"redis: {url: 'unix:///run/redis.sock'}", "redis.url must be"},
		{"redis: {existingSecret: mine}", "leave redis.url empty"},
		{"secrets: {cookieSecret: short}", "at least 32 bytes"},
		{"secrets: {settleSecret: short}", "at least 32 bytes"},
		{"secrets: {webhookSecret: not-a-whsec}", "webhookSecret must be whsec_"},
		{"secrets: {adminToken: 'has a space in it, long'}", "without spaces"},
		{"secrets: {adminToken: short}", "at least 16"},
		{"secrets: {existingSecret: mine, adminToken: 0123456789abcdef0123}", "secrets.adminToken into that Secret"},
		{"admin: {port: 9000}", "secrets.adminToken"},
		{"shop: {port: 9000}", "secrets.databaseUrl and secrets.amqpUrl"},
		{"shop: {port: 8080}\nsecrets: {databaseUrl: 'postgres://pg/shop', amqpUrl: 'amqp://mq/'}", "each listener needs a port of its own"},
		{"config: {shop-addr: ':9000'}", "shop-addr"},
		{"metrics: {port: 8080}", "each listener needs a port of its own"},
		{"metrics: {enabled: false, serviceMonitor: {enabled: true}}", "needs metrics.enabled"},
		// The schema: an unknown key is a typo, never ignored; a secret
		// cannot be put into the ConfigMap through config.
		{"replicas: 3", "replicas"},
		{"config: {admin-token: 0123456789abcdef0123}", "admin-token"},
		{"config: {redis-url: 'redis://x:6379'}", "redis-url"},
		{"config: {no-such-flag: 1}", "no-such-flag"},
		{"config: {max-queue: {a: 1}}", "max-queue"},
		{"ports: {http: 0}", "http"},
	} {
		t.Run(tc.values, func(t *testing.T) {
			_, err := renderText(t, mergedValues(t, nil, tc.values))
			if err == nil {
				t.Fatalf("rendered with %s, want an error about %q", tc.values, tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want one about %q", err, tc.want)
			}
		})
	}
}

// TestShopPort: shop.port runs the built-in shop on a port of its own,
// named on the pods and the Service (for the proxy in front), and set as
// --shop-addr; without it there is no such port.
func TestShopPort(t *testing.T) {
	portsOf := func(m manifests) (container, service map[string]int32, env string) {
		d := the(t, "Deployment", m.deployments)
		c := waitroomContainer(t, d)
		container, service = map[string]int32{}, map[string]int32{}
		for _, p := range c.Ports {
			container[p.Name] = p.ContainerPort
		}
		for _, p := range the(t, "Service", m.services).Spec.Ports {
			if p.TargetPort.StrVal == "shop" {
				service[p.Name] = p.Port
			}
		}
		return container, service, containerEnv(t, m, c)["WAITROOM_SHOP_ADDR"].value
	}
	container, service, env := portsOf(render(t, nil, "shop: {port: 9393}\nsecrets: {databaseUrl: 'postgres://pg/shop', amqpUrl: 'amqp://mq/'}"))
	if container["shop"] != 9393 || service["shop"] != 9393 || env != ":9393" {
		t.Errorf("shop.port 9393: container ports %v, Service ports to shop %v, WAITROOM_SHOP_ADDR %q", container, service, env)
	}
	m := render(t, nil)
	checkService(t, m)
	container, service, env = portsOf(m)
	if _, ok := container["shop"]; ok || len(service) > 0 || env != "" {
		t.Errorf("no shop.port: container ports %v, Service ports to shop %v, WAITROOM_SHOP_ADDR %q", container, service, env)
	}
}
