// helm-render: renders a Helm chart offline, for CI's checks of deploy/helm/missile (Debian 12
// has no helm). Usage:
//
//	helm-render --chart DIR --out DIR [--name NAME] [--namespace NS] [-f VALUES]... [--set K=V]...
//
// .Values is the chart's values.yaml, then each -f file merged over it (maps merged key by key,
// a null deletes a key, anything else replaces), then each --set. A --set takes one dotted key
// and one scalar: true/false, null, an integer, or else a string (no lists, no commas, unlike
// helm's). Each template's output that is not blank is written to --out under its name in
// templates/, preceded by a "# Source:" line as helm template writes it; NOTES.txt is rendered
// and written too. A template that fails (fail, required, a bad value) stops the run: exit
// status 1 and the error on stderr; 2 on bad usage.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func readYAML(path string) (map[string]interface{}, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m := map[string]interface{}{}
	if err := yaml.Unmarshal(text, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// merge puts over onto base, recursively for maps; a nil in over deletes the key.
func merge(base, over map[string]interface{}) map[string]interface{} {
	for k, v := range over {
		if v == nil {
			delete(base, k)
			continue
		}
		bm, bok := base[k].(map[string]interface{})
		om, ook := v.(map[string]interface{})
		if bok && ook {
			base[k] = merge(bm, om)
		} else {
			base[k] = v
		}
	}
	return base
}

func scalar(s string) interface{} {
	switch s {
	case "true":
		return true
	case "false":
		return false
	case "null":
		return nil
	}
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return int(i)
	}
	return s
}

// setValue applies one --set key.path=value.
func setValue(values map[string]interface{}, assignment string) error {
	key, value, ok := strings.Cut(assignment, "=")
	if !ok || key == "" {
		return fmt.Errorf("--set %q: expected key=value", assignment)
	}
	parts := strings.Split(key, ".")
	m := values
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]interface{})
		if !ok {
			next = map[string]interface{}{}
			m[p] = next
		}
		m = next
	}
	merge(m, map[string]interface{}{parts[len(parts)-1]: scalar(value)})
	return nil
}

// chartObject is .Chart: Chart.yaml's keys with their first letter upper-cased, as Helm does.
func chartObject(chartDir string) (map[string]interface{}, error) {
	raw, err := readYAML(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		return nil, err
	}
	chart := map[string]interface{}{}
	for k, v := range raw {
		chart[strings.ToUpper(k[:1])+k[1:]] = v
	}
	if chart["Name"] == nil || chart["Version"] == nil {
		return nil, fmt.Errorf("%s/Chart.yaml needs a name and a version", chartDir)
	}
	return chart, nil
}

func values(chartDir string, files, sets []string) (map[string]interface{}, error) {
	v, err := readYAML(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		over, err := readYAML(f)
		if err != nil {
			return nil, err
		}
		v = merge(v, over)
	}
	for _, s := range sets {
		if err := setValue(v, s); err != nil {
			return nil, err
		}
	}
	return v, nil
}

func run() int {
	chartDir := flag.String("chart", "", "the chart's directory")
	outDir := flag.String("out", "", "where to write the rendered templates")
	name := flag.String("name", "missile", "the release name")
	namespace := flag.String("namespace", "missile-system", "the release namespace")
	var files, sets listFlag
	flag.Var(&files, "f", "a values file (repeatable)")
	flag.Var(&sets, "set", "key.path=value (repeatable)")
	flag.Parse()
	if *chartDir == "" || *outDir == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "helm-render: --chart and --out are required")
		return 2
	}
	chart, err := chartObject(*chartDir)
	if err == nil {
		var v map[string]interface{}
		if v, err = values(*chartDir, files, sets); err == nil {
			err = render(*chartDir, *outDir, map[string]interface{}{
				"Values": v, "Chart": chart,
				"Release": map[string]interface{}{"Name": *name, "Namespace": *namespace,
					"Service": "Helm", "IsInstall": true, "IsUpgrade": false, "Revision": 1},
			})
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "helm-render: %v\n", err)
		return 1
	}
	return 0
}

func render(chartDir, outDir string, top map[string]interface{}) error {
	rendered, err := renderChart(chartDir, top)
	if err != nil {
		return err
	}
	for _, r := range rendered {
		if strings.TrimSpace(r.Text) == "" {
			continue
		}
		text := r.Text
		if strings.HasSuffix(r.Path, ".yaml") {
			text = fmt.Sprintf("---\n# Source: %s/%s\n%s", top["Chart"].(map[string]interface{})["Name"],
				r.Path, strings.TrimLeft(text, "\n"))
		}
		dest := filepath.Join(outDir, strings.TrimPrefix(r.Path, "templates"+string(filepath.Separator)))
		if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(dest, []byte(text), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func main() { os.Exit(run()) }
