{{/* Names, labels, the image, and the checks of values a template cannot render without. */}}

{{- define "missile.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "missile.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: missile
{{- end -}}

{{/* The selector labels of a component: (dict "top" . "component" "node"). */}}
{{- define "missile.selectorLabels" -}}
app.kubernetes.io/name: {{ include "missile.fullname" .top }}-{{ .component }}
app.kubernetes.io/instance: {{ .top.Release.Name }}
{{- end -}}

{{- define "missile.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "missile.webhookService" -}}
{{ include "missile.fullname" . }}-webhook
{{- end -}}

{{/* A quota: a size (16GiB) or a percentage in (0, 100]: (dict "name" "x" "value" "12%").
     Prints the percentage's number, or nothing for a size. */}}
{{- define "missile.quota" -}}
{{- $q := toString .value -}}
{{- if regexMatch `^[0-9]+(\.[0-9]+)?%$` $q -}}
{{- $p := float64 (trimSuffix "%" $q) -}}
{{- if or (le $p 0.0) (gt $p 100.0) -}}
{{- fail (printf "%s: %s is not a percentage in (0%%, 100%%]" .name $q) -}}
{{- end -}}
{{- $p -}}
{{- else if not (regexMatch `^[0-9]+(\.[0-9]+)?(B|K|KB|KiB|M|MB|MiB|G|GB|GiB|T|TB|TiB)$` $q) -}}
{{- fail (printf "%s: %q is neither a size (16GiB) nor a percentage of the pool (12%%)" .name $q) -}}
{{- end -}}
{{- end -}}

{{/* A class's slots and per-slot quota: (dict "name" "devicePlugin.ls" "class" .Values.devicePlugin.ls). */}}
{{- define "missile.slots" -}}
{{- $slots := toString .class.slots -}}
{{- if not (regexMatch `^[0-9]+$` $slots) -}}
{{- fail (printf "%s.slots: %q is not a whole number" .name $slots) -}}
{{- end -}}
{{- $p := include "missile.quota" (dict "name" (printf "%s.quotaPerSlot" .name) "value" .class.quotaPerSlot) -}}
{{- if and $p (gt (mulf (float64 $slots) (float64 $p)) 100.0) -}}
{{- fail (printf "%s: %s slots of %s are more than the GPU's pool (100%%)" .name $slots (toString .class.quotaPerSlot)) -}}
{{- end -}}
{{- end -}}

{{/* Every check at once, run by the templates that use the values. */}}
{{- define "missile.validate" -}}
{{- $_ := include "missile.slots" (dict "name" "devicePlugin.ls" "class" .Values.devicePlugin.ls) -}}
{{- $_ := include "missile.slots" (dict "name" "devicePlugin.be" "class" .Values.devicePlugin.be) -}}
{{- range $class := list "ls" "be" -}}
{{- $c := index $.Values.classes $class -}}
{{- $_ := include "missile.quota" (dict "name" (printf "classes.%s.tenantQuota" $class) "value" $c.tenantQuota) -}}
{{- $_ := include "missile.quota" (dict "name" (printf "classes.%s.classQuota" $class) "value" $c.classQuota) -}}
{{- end -}}
{{- $_ := include "missile.quota" (dict "name" "daemon.poolLimit" "value" .Values.daemon.poolLimit) -}}
{{- end -}}
