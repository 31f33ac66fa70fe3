// Command render renders a Helm chart offline, the way `helm template` does, for
// machines without a helm binary (none exists in the registries reachable here).
//
// It implements the part of Helm 3's engine that charts use (helm.sh/helm/v3
// pkg/engine, pkg/chartutil):
//   - .Values: values.yaml, then each -f file, then --set / --set-string in order,
//     merged as Helm coalesces them (maps merge deeply, null deletes a key); numbers
//     from YAML files are float64 as in Helm (which decodes through JSON), numbers
//     from --set are int64; the result is checked against values.schema.json;
//   - .Release{Name,Namespace,IsInstall,IsUpgrade,Revision,Service}, .Chart (the
//     Chart.yaml fields, capitalised), .Capabilities{KubeVersion,APIVersions.Has},
//     .Template{Name,BasePath}, .Files{Get,GetBytes,Glob,Lines};
//   - functions: sprig's text functions without env/expandenv (Helm drops them), and
//     Helm's include, tpl, required, toYaml, fromYaml, toJson, fromJson, lookup;
//   - `lookup` answers from --lookup-file (objects that "exist in the cluster"), or
//     an empty map like `helm template` does without a cluster;
//   - templates/_* are helpers only; NOTES.txt is rendered apart (--notes prints it
//     to stderr); each document must parse as YAML; documents are sorted by Helm's
//     install order of kinds.
//
// Output: one multi-document YAML stream (--output yaml, with "# Source:" comments)
// or a JSON array of the documents (--output json). A template error, a `fail`, a
// `required` value missing, a schema violation or a YAML error prints "Error: ..."
// to stderr and exits 1; bad usage exits 2.
//
// Build (GOPATH mode, Debian's packages): GOPATH=/usr/share/gocode GO111MODULE=off
// go build -o render charts/render/render.go
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/template"

	"github.com/Masterminds/semver"
	"github.com/Masterminds/sprig"
	"gopkg.in/yaml.v3"
)

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// override is one --set or --set-string argument, kept in command-line order.
type override struct {
	expr     string
	asString bool
}

type overrideList struct {
	list     *[]override
	asString bool
}

func (o overrideList) String() string { return "" }
func (o overrideList) Set(v string) error {
	*o.list = append(*o.list, override{v, o.asString})
	return nil
}

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	fs := flag.NewFlagSet("render", flag.ContinueOnError)
	name := fs.String("name", "release-name", "release name (.Release.Name)")
	namespace := fs.String("namespace", "default", "release namespace (.Release.Namespace)")
	isUpgrade := fs.Bool("is-upgrade", false, "render as an upgrade (.Release.IsUpgrade)")
	output := fs.String("output", "yaml", "yaml (a multi-document stream) or json (an array)")
	kubeVersion := fs.String("kube-version", "v1.32.0", "the cluster version (.Capabilities.KubeVersion)")
	lookupFile := fs.String("lookup-file", "", "YAML/JSON objects that `lookup` finds (one stream or a List)")
	notes := fs.Bool("notes", false, "also render NOTES.txt and print it to stderr")
	var valueFiles, apiVersions stringList
	var sets []override
	fs.Var(&valueFiles, "f", "a values file (repeatable)")
	fs.Var(&valueFiles, "values", "a values file (repeatable)")
	fs.Var(overrideList{&sets, false}, "set", "key=value[,key=value] (repeatable)")
	fs.Var(overrideList{&sets, true}, "set-string", "key=value, value kept a string (repeatable)")
	fs.Var(&apiVersions, "api-versions", "extra group/version or group/version/Kind in .Capabilities.APIVersions (repeatable)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: render [flags] <chart dir>")
		fs.PrintDefaults()
	}
	// Flags may come before or after the chart directory, as with helm.
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(positional) != 1 || (*output != "yaml" && *output != "json") {
		fs.Usage()
		return 2
	}
	r := renderer{
		chartDir: positional[0], release: *name, namespace: *namespace, isUpgrade: *isUpgrade,
		kubeVersion: *kubeVersion, valueFiles: valueFiles, sets: sets, apiVersions: apiVersions,
		lookupFile: *lookupFile,
	}
	docs, notesText, err := r.render()
	if err != nil {
		fmt.Fprintf(os.Stderr, "Error: %s\n", err)
		return 1
	}
	if *notes && notesText != "" {
		fmt.Fprintln(os.Stderr, notesText)
	}
	if *output == "json" {
		objs := make([]interface{}, 0, len(docs))
		for _, d := range docs {
			objs = append(objs, d.object)
		}
		out, err := json.MarshalIndent(objs, "", "  ")
		if err != nil {
			fmt.Fprintf(os.Stderr, "Error: %s\n", err)
			return 1
		}
		os.Stdout.Write(append(out, '\n'))
		return 0
	}
	var b strings.Builder
	for _, d := range docs {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", d.source, strings.Trim(d.text, "\n"))
	}
	os.Stdout.WriteString(b.String())
	return 0
}

type renderer struct {
	chartDir, release, namespace, kubeVersion, lookupFile string
	isUpgrade                                             bool
	valueFiles, apiVersions                               []string
	sets                                                  []override
	lookupObjects                                         []map[string]interface{}
}

type document struct {
	source string
	text   string
	object map[string]interface{}
	kind   string
	name   string
}

func (r *renderer) render() ([]document, string, error) {
	chartMeta, err := readYAMLMap(filepath.Join(r.chartDir, "Chart.yaml"))
	if err != nil {
		return nil, "", err
	}
	chartName, _ := chartMeta["name"].(string)
	if chartName == "" {
		return nil, "", errors.New("Chart.yaml: name is required")
	}
	if err := r.checkKubeVersion(chartMeta); err != nil {
		return nil, "", err
	}
	values, err := r.values()
	if err != nil {
		return nil, "", err
	}
	if r.lookupFile != "" {
		if r.lookupObjects, err = readObjects(r.lookupFile); err != nil {
			return nil, "", err
		}
	}
	files, err := chartFiles(r.chartDir)
	if err != nil {
		return nil, "", err
	}

	// All templates share one set so that `include` reaches every helper, as in
	// Helm; each is named <chart>/templates/<file>.
	root := template.New("gotpl")
	funcs := r.funcMap(root)
	root.Funcs(funcs).Option("missingkey=zero")
	tplDir := filepath.Join(r.chartDir, "templates")
	var names []string
	err = filepath.Walk(tplDir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(r.chartDir, p)
		tname := path.Join(chartName, filepath.ToSlash(rel))
		body, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if _, err := root.New(tname).Parse(string(body)); err != nil {
			return fmt.Errorf("parse error in %q: %w", tname, err)
		}
		names = append(names, tname)
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	// NOTES.txt last, so that an error is reported where the manifests hit it.
	sort.Slice(names, func(i, j int) bool {
		ni, nj := path.Base(names[i]) == "NOTES.txt", path.Base(names[j]) == "NOTES.txt"
		if ni != nj {
			return nj
		}
		return names[i] < names[j]
	})

	top := map[string]interface{}{
		"Values": values,
		"Release": map[string]interface{}{
			"Name": r.release, "Namespace": r.namespace, "IsInstall": !r.isUpgrade,
			"IsUpgrade": r.isUpgrade, "Revision": revision(r.isUpgrade), "Service": "Helm",
		},
		"Chart":        chartObject(chartMeta),
		"Capabilities": r.capabilities(),
		"Files":        files,
	}

	var docs []document
	var notes string
	for _, tname := range names {
		base := path.Base(tname)
		if strings.HasPrefix(base, "_") {
			continue
		}
		isNotes := base == "NOTES.txt"
		if !isNotes && !strings.HasSuffix(base, ".yaml") && !strings.HasSuffix(base, ".yml") &&
			!strings.HasSuffix(base, ".tpl") {
			continue
		}
		data := copyTop(top, tname, chartName)
		var buf bytes.Buffer
		if err := root.ExecuteTemplate(&buf, tname, data); err != nil {
			return nil, "", cleanExecError(err)
		}
		text := strings.ReplaceAll(buf.String(), "<no value>", "")
		if isNotes {
			notes = text
			continue
		}
		split, err := splitDocuments(tname, text)
		if err != nil {
			return nil, "", err
		}
		docs = append(docs, split...)
	}
	sortByInstallOrder(docs)
	return docs, notes, nil
}

func revision(upgrade bool) int {
	if upgrade {
		return 2
	}
	return 1
}

func copyTop(top map[string]interface{}, tname, chartName string) map[string]interface{} {
	data := make(map[string]interface{}, len(top)+1)
	for k, v := range top {
		data[k] = v
	}
	data["Template"] = map[string]interface{}{"Name": tname, "BasePath": path.Join(chartName, "templates")}
	return data
}

// chartObject gives Chart.yaml's fields under Helm's Go names (.Chart.Name,
// .Chart.AppVersion, ...).
func chartObject(meta map[string]interface{}) map[string]interface{} {
	out := map[string]interface{}{}
	for k, v := range meta {
		if k == "apiVersion" {
			out["APIVersion"] = v
			continue
		}
		if k == "kubeVersion" {
			out["KubeVersion"] = v
			continue
		}
		out[strings.ToUpper(k[:1])+k[1:]] = v
	}
	return out
}

func (r *renderer) checkKubeVersion(meta map[string]interface{}) error {
	want, _ := meta["kubeVersion"].(string)
	if want == "" {
		return nil
	}
	c, err := semver.NewConstraint(want)
	if err != nil {
		return fmt.Errorf("Chart.yaml: kubeVersion %q: %w", want, err)
	}
	v, err := semver.NewVersion(r.kubeVersion)
	if err != nil {
		return fmt.Errorf("--kube-version %q: %w", r.kubeVersion, err)
	}
	if !c.Check(v) {
		return fmt.Errorf("chart requires kubeVersion: %s which is incompatible with Kubernetes %s", want, r.kubeVersion)
	}
	return nil
}

// apiVersionSet is .Capabilities.APIVersions: Has("apps/v1") or Has("apps/v1/Deployment").
type apiVersionSet []string

func (a apiVersionSet) Has(v string) bool {
	for _, x := range a {
		if x == v {
			return true
		}
	}
	return false
}

func (r *renderer) capabilities() map[string]interface{} {
	v, _ := semver.NewVersion(r.kubeVersion)
	major, minor := "1", "32"
	if v != nil {
		major, minor = strconv.FormatUint(v.Major(), 10), strconv.FormatUint(v.Minor(), 10)
	}
	versions := apiVersionSet{
		"v1", "apps/v1", "batch/v1", "policy/v1", "networking.k8s.io/v1",
		"rbac.authorization.k8s.io/v1", "coordination.k8s.io/v1", "apiregistration.k8s.io/v1",
		"admissionregistration.k8s.io/v1", "apiextensions.k8s.io/v1", "autoscaling/v2",
		"events.k8s.io/v1", "storage.k8s.io/v1", "scheduling.k8s.io/v1",
	}
	versions = append(versions, r.apiVersions...)
	gitVersion := r.kubeVersion
	if !strings.HasPrefix(gitVersion, "v") {
		gitVersion = "v" + gitVersion
	}
	return map[string]interface{}{
		"KubeVersion": map[string]interface{}{
			"Version": gitVersion, "GitVersion": gitVersion, "Major": major, "Minor": minor,
		},
		"APIVersions": versions,
		"HelmVersion": map[string]interface{}{"Version": "v3.16.0"},
	}
}

// ---------------------------------------------------------------------------
// Functions.

func (r *renderer) funcMap(root *template.Template) template.FuncMap {
	f := sprig.TxtFuncMap()
	delete(f, "env")
	delete(f, "expandenv")
	includeDepth := map[string]int{}
	f["include"] = func(name string, data interface{}) (string, error) {
		// Helm bounds recursion the same way (1000 nested includes).
		includeDepth[name]++
		defer func() { includeDepth[name]-- }()
		if includeDepth[name] > 1000 {
			return "", fmt.Errorf("rendering template has a nested reference name: %s", name)
		}
		var buf bytes.Buffer
		if err := root.ExecuteTemplate(&buf, name, data); err != nil {
			return "", err
		}
		return buf.String(), nil
	}
	f["tpl"] = func(text string, data interface{}) (string, error) {
		t, err := root.Clone()
		if err != nil {
			return "", err
		}
		t, err = t.New("tpl").Parse(text)
		if err != nil {
			return "", fmt.Errorf("cannot parse template %q: %w", text, err)
		}
		var buf bytes.Buffer
		if err := t.Execute(&buf, data); err != nil {
			return "", fmt.Errorf("error during tpl function execution for %q: %w", text, err)
		}
		return strings.ReplaceAll(buf.String(), "<no value>", ""), nil
	}
	f["required"] = func(msg string, v interface{}) (interface{}, error) {
		if v == nil {
			return v, errors.New(msg)
		}
		if s, ok := v.(string); ok && s == "" {
			return v, errors.New(msg)
		}
		return v, nil
	}
	f["toYaml"] = func(v interface{}) string {
		s, err := toYAML(v)
		if err != nil {
			return "" // Helm swallows the error the same way.
		}
		return strings.TrimSuffix(s, "\n")
	}
	f["fromYaml"] = func(s string) map[string]interface{} {
		m := map[string]interface{}{}
		if err := yaml.Unmarshal([]byte(s), &m); err != nil {
			m["Error"] = err.Error()
		}
		return m
	}
	f["toJson"] = func(v interface{}) string {
		b, err := json.Marshal(v)
		if err != nil {
			return ""
		}
		return string(b)
	}
	f["fromJson"] = func(s string) map[string]interface{} {
		m := map[string]interface{}{}
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			m["Error"] = err.Error()
		}
		return m
	}
	f["lookup"] = r.lookup
	return f
}

// toYAML writes v with two-space indentation, keys sorted, numbers without a
// trailing ".0" (Helm renders through JSON, where 1.0 is 1).
func toYAML(v interface{}) (string, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(normalizeNumbers(v)); err != nil {
		return "", err
	}
	enc.Close()
	return buf.String(), nil
}

func normalizeNumbers(v interface{}) interface{} {
	switch t := v.(type) {
	case map[string]interface{}:
		out := make(map[string]interface{}, len(t))
		for k, x := range t {
			out[k] = normalizeNumbers(x)
		}
		return out
	case []interface{}:
		out := make([]interface{}, len(t))
		for i, x := range t {
			out[i] = normalizeNumbers(x)
		}
		return out
	case float64:
		if t == math.Trunc(t) && math.Abs(t) < 1e15 {
			return int64(t)
		}
	}
	return v
}

// lookup answers from --lookup-file; without it, like `helm template`, it finds
// nothing (an empty map).
func (r *renderer) lookup(apiVersion, kind, namespace, name string) (map[string]interface{}, error) {
	var items []interface{}
	for _, o := range r.lookupObjects {
		if o["apiVersion"] != apiVersion || o["kind"] != kind {
			continue
		}
		meta, _ := o["metadata"].(map[string]interface{})
		ns, _ := meta["namespace"].(string)
		n, _ := meta["name"].(string)
		if namespace != "" && ns != namespace {
			continue
		}
		if name != "" {
			if n == name {
				return o, nil
			}
			continue
		}
		items = append(items, o)
	}
	if name != "" {
		return map[string]interface{}{}, nil
	}
	if items == nil {
		items = []interface{}{}
	}
	return map[string]interface{}{"apiVersion": apiVersion, "kind": kind + "List", "items": items}, nil
}

// cleanExecError shortens text/template's error chain to the message a template's
// `fail` or `required` gave, with its position, as Helm prints it.
func cleanExecError(err error) error {
	var execErr template.ExecError
	if !errors.As(err, &execErr) {
		return err
	}
	msg := err.Error()
	for _, marker := range []string{"error calling fail: ", "error calling required: ", "error calling include: "} {
		for strings.Contains(msg, marker) {
			msg = msg[strings.LastIndex(msg, marker)+len(marker):]
		}
	}
	loc := execErr.Name
	if m := regexp.MustCompile(`^template: ([^:]+:\d+:\d+): `).FindStringSubmatch(err.Error()); m != nil {
		loc = m[1]
	}
	return fmt.Errorf("execution error at (%s): %s", loc, msg)
}

// ---------------------------------------------------------------------------
// Values.

func (r *renderer) values() (map[string]interface{}, error) {
	values := map[string]interface{}{}
	defaults := filepath.Join(r.chartDir, "values.yaml")
	if _, err := os.Stat(defaults); err == nil {
		m, err := readYAMLMap(defaults)
		if err != nil {
			return nil, err
		}
		values = m
	}
	for _, f := range r.valueFiles {
		m, err := readYAMLMap(f)
		if err != nil {
			return nil, err
		}
		values = coalesce(values, m)
	}
	for _, s := range r.sets {
		m, err := parseSet(s.expr, s.asString)
		if err != nil {
			return nil, fmt.Errorf("failed parsing --set data %q: %w", s.expr, err)
		}
		values = coalesce(values, m)
	}
	schemaPath := filepath.Join(r.chartDir, "values.schema.json")
	if raw, err := os.ReadFile(schemaPath); err == nil {
		var schema map[string]interface{}
		if err := json.Unmarshal(raw, &schema); err != nil {
			return nil, fmt.Errorf("values.schema.json: %w", err)
		}
		var problems []string
		validate(schema, values, "", &problems)
		if len(problems) > 0 {
			return nil, fmt.Errorf("values don't meet the specifications of the schema(s) in the following chart(s):\n%s",
				"- "+strings.Join(problems, "\n- "))
		}
	}
	return values, nil
}

// readYAMLMap reads a YAML mapping and passes it through JSON, as Helm does, so
// that numbers are float64 and keys strings.
func readYAMLMap(p string) (map[string]interface{}, error) {
	raw, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	var m map[string]interface{}
	if err := yaml.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	if m == nil {
		m = map[string]interface{}{}
	}
	return throughJSON(m)
}

func throughJSON(m map[string]interface{}) (map[string]interface{}, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	out := map[string]interface{}{}
	return out, json.Unmarshal(b, &out)
}

func readObjects(p string) ([]map[string]interface{}, error) {
	raw, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	var out []map[string]interface{}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	for {
		var m map[string]interface{}
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if m == nil {
			continue
		}
		if items, ok := m["items"].([]interface{}); ok && strings.HasSuffix(fmt.Sprint(m["kind"]), "List") {
			for _, it := range items {
				if o, ok := it.(map[string]interface{}); ok {
					out = append(out, o)
				}
			}
			continue
		}
		out = append(out, m)
	}
	return out, nil
}

// coalesce merges src over dst: maps merge key by key, anything else replaces,
// a null deletes the key (Helm's chartutil.CoalesceTables for user values).
func coalesce(dst, src map[string]interface{}) map[string]interface{} {
	out := make(map[string]interface{}, len(dst))
	for k, v := range dst {
		out[k] = v
	}
	for k, v := range src {
		if v == nil {
			delete(out, k)
			continue
		}
		sm, sok := v.(map[string]interface{})
		dm, dok := out[k].(map[string]interface{})
		if sok && dok {
			out[k] = coalesce(dm, sm)
		} else {
			out[k] = v
		}
	}
	return out
}

// parseSet parses Helm's --set syntax: comma-separated key=value pairs, dotted
// keys (`\.` escapes a dot), `{a,b}` lists, `name[0]` list indexes; values
// true/false/null and integers are typed unless asString (Helm's strvals).
func parseSet(expr string, asString bool) (map[string]interface{}, error) {
	out := map[string]interface{}{}
	for _, pair := range splitTop(expr, ',') {
		if pair == "" {
			continue
		}
		eq := indexUnescaped(pair, '=')
		if eq < 0 {
			return nil, fmt.Errorf("key %q has no value", pair)
		}
		key, raw := pair[:eq], pair[eq+1:]
		var val interface{}
		if strings.HasPrefix(raw, "{") && strings.HasSuffix(raw, "}") {
			list := []interface{}{}
			for _, item := range splitTop(raw[1:len(raw)-1], ',') {
				list = append(list, typed(unescape(item), asString))
			}
			val = list
		} else {
			val = typed(unescape(raw), asString)
		}
		if err := setPath(out, splitKey(key), val); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func typed(s string, asString bool) interface{} {
	if asString {
		return s
	}
	switch s {
	case "true":
		return true
	case "false":
		return false
	case "null":
		return nil
	}
	// Helm keeps "0123" a string and makes other integers int64.
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && (s == "0" || !strings.HasPrefix(s, "0")) {
		return n
	}
	return s
}

var indexRe = regexp.MustCompile(`^(.*)\[(\d+)\]$`)

func setPath(m map[string]interface{}, keys []string, val interface{}) error {
	k := keys[0]
	if ix := indexRe.FindStringSubmatch(k); ix != nil {
		i, _ := strconv.Atoi(ix[2])
		list, _ := m[ix[1]].([]interface{})
		for len(list) <= i {
			list = append(list, nil)
		}
		if len(keys) == 1 {
			list[i] = val
		} else {
			child, _ := list[i].(map[string]interface{})
			if child == nil {
				child = map[string]interface{}{}
			}
			if err := setPath(child, keys[1:], val); err != nil {
				return err
			}
			list[i] = child
		}
		m[ix[1]] = list
		return nil
	}
	if len(keys) == 1 {
		m[k] = val
		return nil
	}
	child, _ := m[k].(map[string]interface{})
	if child == nil {
		child = map[string]interface{}{}
		m[k] = child
	}
	return setPath(child, keys[1:], val)
}

func splitTop(s string, sep byte) []string {
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '{':
			depth++
		case '}':
			depth--
		case sep:
			if depth == 0 {
				parts = append(parts, s[start:i])
				start = i + 1
			}
		}
	}
	return append(parts, s[start:])
}

func splitKey(k string) []string {
	var parts []string
	var cur strings.Builder
	for i := 0; i < len(k); i++ {
		if k[i] == '\\' && i+1 < len(k) {
			cur.WriteByte(k[i+1])
			i++
			continue
		}
		if k[i] == '.' {
			parts = append(parts, cur.String())
			cur.Reset()
			continue
		}
		cur.WriteByte(k[i])
	}
	return append(parts, cur.String())
}

func indexUnescaped(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' {
			i++
			continue
		}
		if s[i] == c {
			return i
		}
	}
	return -1
}

func unescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// validate checks v against the subset of JSON Schema (draft 7) that chart
// schemas use: type, properties, required, additionalProperties, items, enum,
// const, minimum, maximum, minLength, maxLength, pattern, minItems, anyOf, if/then.
func validate(schema map[string]interface{}, v interface{}, at string, problems *[]string) {
	where := at
	if where == "" {
		where = "(root)"
	}
	add := func(format string, args ...interface{}) {
		*problems = append(*problems, where+": "+fmt.Sprintf(format, args...))
	}
	if t, ok := schema["type"]; ok {
		var types []string
		switch tt := t.(type) {
		case string:
			types = []string{tt}
		case []interface{}:
			for _, x := range tt {
				types = append(types, fmt.Sprint(x))
			}
		}
		matched := false
		for _, ty := range types {
			if hasType(v, ty) {
				matched = true
			}
		}
		if !matched {
			add("Invalid type. Expected: %s, given: %s", strings.Join(types, " or "), typeName(v))
			return
		}
	}
	if enum, ok := schema["enum"].([]interface{}); ok {
		found := false
		for _, e := range enum {
			if equalJSON(e, v) {
				found = true
			}
		}
		if !found {
			b, _ := json.Marshal(enum)
			add("must be one of the following: %s", b)
		}
	}
	if c, ok := schema["const"]; ok && !equalJSON(c, v) {
		add("does not match: %v", c)
	}
	if n, ok := number(v); ok {
		if min, ok := schema["minimum"].(float64); ok && n < min {
			add("Must be greater than or equal to %v", min)
		}
		if max, ok := schema["maximum"].(float64); ok && n > max {
			add("Must be less than or equal to %v", max)
		}
	}
	if s, ok := v.(string); ok {
		if min, ok := schema["minLength"].(float64); ok && float64(len(s)) < min {
			add("String length must be greater than or equal to %v", min)
		}
		if max, ok := schema["maxLength"].(float64); ok && float64(len(s)) > max {
			add("String length must be less than or equal to %v", max)
		}
		if p, ok := schema["pattern"].(string); ok {
			if re, err := regexp.Compile(p); err == nil && !re.MatchString(s) {
				add("Does not match pattern '%s'", p)
			}
		}
	}
	if list, ok := v.([]interface{}); ok {
		if min, ok := schema["minItems"].(float64); ok && float64(len(list)) < min {
			add("Array must have at least %v items", min)
		}
		if items, ok := schema["items"].(map[string]interface{}); ok {
			for i, x := range list {
				validate(items, x, fmt.Sprintf("%s.%d", at, i), problems)
			}
		}
	}
	if m, ok := v.(map[string]interface{}); ok {
		props, _ := schema["properties"].(map[string]interface{})
		if req, ok := schema["required"].([]interface{}); ok {
			for _, r := range req {
				if _, ok := m[fmt.Sprint(r)]; !ok {
					add("%s is required", r)
				}
			}
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			child := joinPath(at, k)
			if ps, ok := props[k].(map[string]interface{}); ok {
				validate(ps, m[k], child, problems)
				continue
			}
			switch ap := schema["additionalProperties"].(type) {
			case bool:
				if !ap {
					add("Additional property %s is not allowed", k)
				}
			case map[string]interface{}:
				validate(ap, m[k], child, problems)
			}
		}
	}
	if anyOf, ok := schema["anyOf"].([]interface{}); ok {
		okAny := false
		for _, s := range anyOf {
			var p []string
			if sm, ok := s.(map[string]interface{}); ok {
				validate(sm, v, at, &p)
			}
			if len(p) == 0 {
				okAny = true
				break
			}
		}
		if !okAny {
			add("Must validate at least one schema (anyOf)")
		}
	}
	if ifs, ok := schema["if"].(map[string]interface{}); ok {
		var p []string
		validate(ifs, v, at, &p)
		if then, ok := schema["then"].(map[string]interface{}); ok && len(p) == 0 {
			validate(then, v, at, problems)
		}
	}
}

func joinPath(at, k string) string {
	if at == "" {
		return k
	}
	return at + "." + k
}

func number(v interface{}) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	}
	return 0, false
}

func hasType(v interface{}, t string) bool {
	switch t {
	case "null":
		return v == nil
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "object":
		_, ok := v.(map[string]interface{})
		return ok
	case "array":
		_, ok := v.([]interface{})
		return ok
	case "number":
		_, ok := number(v)
		return ok
	case "integer":
		n, ok := number(v)
		return ok && n == math.Trunc(n)
	}
	return false
}

func typeName(v interface{}) string {
	for _, t := range []string{"null", "boolean", "string", "object", "array", "integer", "number"} {
		if hasType(v, t) {
			return t
		}
	}
	return fmt.Sprintf("%T", v)
}

func equalJSON(a, b interface{}) bool {
	if x, ok := number(a); ok {
		y, ok := number(b)
		return ok && x == y
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// ---------------------------------------------------------------------------
// Files (.Files), output documents.

// chartFiles is .Files: every file of the chart outside templates/ other than
// Chart.yaml, values.yaml and values.schema.json, keyed by slash path.
type chartFileSet map[string][]byte

func chartFiles(dir string) (chartFileSet, error) {
	out := chartFileSet{}
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if info.IsDir() {
			if rel == "templates" || rel == "charts" || strings.HasPrefix(info.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		switch rel {
		case "Chart.yaml", "values.yaml", "values.schema.json", ".helmignore":
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out[rel] = b
		return nil
	})
	return out, err
}

func (f chartFileSet) Get(name string) string      { return string(f[name]) }
func (f chartFileSet) GetBytes(name string) []byte { return f[name] }
func (f chartFileSet) Lines(name string) []string {
	s := strings.TrimSuffix(string(f[name]), "\n")
	if s == "" {
		return []string{}
	}
	return strings.Split(s, "\n")
}
func (f chartFileSet) Glob(pattern string) chartFileSet {
	out := chartFileSet{}
	for k, v := range f {
		if ok, _ := path.Match(pattern, k); ok {
			out[k] = v
		}
	}
	return out
}

var docSep = regexp.MustCompile(`(?m)^---[ \t]*(#.*)?$`)

func splitDocuments(source, text string) ([]document, error) {
	var docs []document
	for _, part := range docSep.Split(text, -1) {
		if strings.TrimSpace(part) == "" {
			continue
		}
		var obj map[string]interface{}
		if err := yaml.Unmarshal([]byte(part), &obj); err != nil {
			return nil, fmt.Errorf("YAML parse error on %s: %w", source, err)
		}
		if obj == nil {
			continue // comments only
		}
		obj, err := throughJSON(obj)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		kind, _ := obj["kind"].(string)
		if kind == "" || obj["apiVersion"] == nil {
			return nil, fmt.Errorf("%s: a document without apiVersion or kind", source)
		}
		meta, _ := obj["metadata"].(map[string]interface{})
		name, _ := meta["name"].(string)
		docs = append(docs, document{source: source, text: part, object: obj, kind: kind, name: name})
	}
	return docs, nil
}

// installOrder is Helm's releaseutil.InstallOrder; other kinds come after it.
var installOrder = []string{
	"PriorityClass", "Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange",
	"PodSecurityPolicy", "PodDisruptionBudget", "ServiceAccount", "Secret", "SecretList",
	"ConfigMap", "StorageClass", "PersistentVolume", "PersistentVolumeClaim",
	"CustomResourceDefinition", "ClusterRole", "ClusterRoleList", "ClusterRoleBinding",
	"ClusterRoleBindingList", "Role", "RoleList", "RoleBinding", "RoleBindingList", "Service",
	"DaemonSet", "Pod", "ReplicationController", "ReplicaSet", "Deployment",
	"HorizontalPodAutoscaler", "StatefulSet", "Job", "CronJob", "IngressClass", "Ingress",
	"APIService",
}

func sortByInstallOrder(docs []document) {
	rank := func(kind string) int {
		for i, k := range installOrder {
			if k == kind {
				return i
			}
		}
		return len(installOrder)
	}
	sort.SliceStable(docs, func(i, j int) bool {
		ri, rj := rank(docs[i].kind), rank(docs[j].kind)
		if ri != rj {
			return ri < rj
		}
		if ri == len(installOrder) && docs[i].kind != docs[j].kind {
			return docs[i].kind < docs[j].kind
		}
		return false
	})
}
