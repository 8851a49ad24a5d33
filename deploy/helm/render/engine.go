// The template engine: Go's text/template with sprig's functions and what Helm's engine adds
// on top (include, tpl, required, toYaml, fromYaml, lookup), over a chart's templates/.
//
// It follows Helm 3's engine where the chart relies on it: every file of templates/ is parsed
// into one template set (so a define in _helpers.tpl is seen by all), files whose name starts
// with "_" are not rendered, a missing value renders as nothing, and env/expandenv are not
// offered (Helm removes them). It is not Helm: no subcharts, hooks, .Capabilities, .Files or
// schema validation; a chart that needs them does not render here.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/template"

	sprig "github.com/Masterminds/sprig"
	"gopkg.in/yaml.v3"
)

// toYAML writes v as YAML indented by two spaces, without the final newline (as Helm's toYaml).
func toYAML(v interface{}) string {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return ""
	}
	enc.Close()
	return strings.TrimSuffix(buf.String(), "\n")
}

func fromYAML(s string) map[string]interface{} {
	m := map[string]interface{}{}
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}

// required fails the render with msg when v is missing or an empty string.
func required(msg string, v interface{}) (interface{}, error) {
	if v == nil {
		return v, errors.New(msg)
	}
	if s, ok := v.(string); ok && s == "" {
		return v, errors.New(msg)
	}
	return v, nil
}

// funcMap is sprig's functions with Helm's additions; include and tpl run in root.
func funcMap(root **template.Template) template.FuncMap {
	f := sprig.TxtFuncMap()
	delete(f, "env")
	delete(f, "expandenv")
	f["toYaml"] = toYAML
	f["fromYaml"] = fromYAML
	f["required"] = required
	f["lookup"] = func(string, string, string, string) map[string]interface{} {
		return map[string]interface{}{} // no cluster to look in, as under helm template
	}
	f["include"] = func(name string, data interface{}) (string, error) {
		var buf bytes.Buffer
		err := (*root).ExecuteTemplate(&buf, name, data)
		return buf.String(), err
	}
	f["tpl"] = func(text string, data interface{}) (string, error) {
		t, err := (*root).Clone()
		if err != nil {
			return "", err
		}
		t, err = t.New("tpl").Parse(text)
		if err != nil {
			return "", err
		}
		var buf bytes.Buffer
		err = t.Execute(&buf, data)
		return buf.String(), err
	}
	return f
}

// Rendered is one template's output, by its path under the chart (templates/x.yaml).
// Templates are named as in Helm, chart name first (missile/templates/x.yaml), since
// .Template.BasePath and include refer to them by that name.
type Rendered struct {
	Path string
	Text string
}

// renderChart renders every template of chartDir's templates/ with the given top-level values.
func renderChart(chartDir string, top map[string]interface{}) ([]Rendered, error) {
	var root *template.Template
	root = template.New("chart").Funcs(funcMap(&root)).Option("missingkey=zero")
	var names []string
	chart, _ := top["Chart"].(map[string]interface{})
	prefix := fmt.Sprint(chart["Name"])
	dir := filepath.Join(chartDir, "templates")
	err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		text, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(chartDir, path)
		if _, err := root.New(filepath.Join(prefix, rel)).Parse(string(text)); err != nil {
			return err
		}
		names = append(names, rel)
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []Rendered
	for _, name := range names {
		if strings.HasPrefix(filepath.Base(name), "_") {
			continue
		}
		var buf bytes.Buffer
		data := withTemplate(top, prefix, name)
		if err := root.ExecuteTemplate(&buf, filepath.Join(prefix, name), data); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		text := strings.ReplaceAll(buf.String(), "<no value>", "")
		out = append(out, Rendered{Path: name, Text: text})
	}
	return out, nil
}

// withTemplate adds .Template (Name, BasePath) for the template being rendered.
func withTemplate(top map[string]interface{}, prefix, name string) map[string]interface{} {
	data := map[string]interface{}{}
	for k, v := range top {
		data[k] = v
	}
	data["Template"] = map[string]interface{}{
		"Name":     filepath.Join(prefix, name),
		"BasePath": filepath.Join(prefix, "templates"),
	}
	return data
}
