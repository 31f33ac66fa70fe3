{{/* Chart name, truncated to the 63 characters of a DNS label. */}}
{{- define "poolcoord.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Full name of the release's objects: <release> when it already contains the chart
name, else <release>-<chart>. It also names the Service, so the serving certificate's
SANs are <fullname>.<namespace>.svc.
*/}}
{{- define "poolcoord.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "poolcoord.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "poolcoord.selectorLabels" -}}
app.kubernetes.io/name: {{ include "poolcoord.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/*
The server's pods alone: the agent's pods carry the name and instance too, so the
Service, the PodDisruptionBudget, the NetworkPolicy and the anti-affinity select
by the component as well (a PDB that also matched the DaemonSet's pods was never
computed: "daemonsets.apps does not implement the scale subresource", and every
eviction of the server's pod refused). The Deployment's own selector stays the
two labels above: a Deployment's selector cannot change on upgrade.
*/}}
{{- define "poolcoord.serverSelectorLabels" -}}
{{ include "poolcoord.selectorLabels" . }}
app.kubernetes.io/component: apiserver
{{- end -}}

{{- define "poolcoord.labels" -}}
helm.sh/chart: {{ include "poolcoord.chart" . }}
{{ include "poolcoord.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: apiserver
{{- end -}}

{{- define "poolcoord.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "poolcoord.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create=false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The forwarder's identity in the cloud cluster: the pod's service account. */}}
{{- define "poolcoord.forwarderUser" -}}
{{- printf "system:serviceaccount:%s:%s" .Release.Namespace (include "poolcoord.serviceAccountName" .) -}}
{{- end -}}

{{- define "poolcoord.servingSecretName" -}}
{{- printf "%s-serving-cert" (include "poolcoord.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "poolcoord.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/*
The replica count, after the guard: the memory store keeps every PoolLease in the
pod's memory, so two replicas behind one Service would run two independent elections
per pool. Several replicas need storage.backend=etcd3 (shared state, one replica
elected to forward).
*/}}
{{- define "poolcoord.replicas" -}}
{{- $replicas := int .Values.replicas -}}
{{- if and (gt $replicas 1) (ne .Values.storage.backend "etcd3") -}}
{{- fail (printf "replicas=%d needs storage.backend=etcd3: with storage.backend=%s each replica keeps its own PoolLeases in memory and pools would elect one leader per replica; set replicas=1 or storage.backend=etcd3 with storage.etcd.servers" $replicas .Values.storage.backend) -}}
{{- end -}}
{{- $replicas -}}
{{- end -}}

{{/* Server ports: the container's serving port. */}}
{{- define "poolcoord.securePort" -}}
{{- int .Values.server.securePort -}}
{{- end -}}

{{/* The annotation and namespace the webhook and the admission policy act on. */}}
{{- define "poolcoord.delegateAnnotation" -}}openyurt.io/delegate-heartbeat{{- end -}}

{{/* CEL: the written Lease carries the delegate annotation. */}}
{{- define "poolcoord.cel.annotated" -}}
has(object.metadata.annotations) && '{{ include "poolcoord.delegateAnnotation" . }}' in object.metadata.annotations
{{- end -}}

{{/* CEL: the writer is the node whose Lease it is (its kubelet). */}}
{{- define "poolcoord.cel.byTheNode" -}}
request.userInfo.username == 'system:node:' + object.metadata.name
{{- end -}}

{{- define "poolcoord.cel.notByTheNode" -}}
request.userInfo.username != 'system:node:' + object.metadata.name
{{- end -}}

{{/*
CEL: the writer is not this release's forwarder. On the memory store (one replica)
the webhook would judge the forwarder's write by the very store, in the very process,
the forwarder consulted a moment before: a second look that costs kube-apiserver a
webhook call per forwarded renewal (a quarter of its CPU per forward) and can only
agree. With etcd3 the review stays: there it is a consistent read of what another
replica, or this one's watch cache, may not have seen yet.
*/}}
{{- define "poolcoord.cel.notByTheForwarder" -}}
request.userInfo.username != '{{ include "poolcoord.forwarderUser" . }}'
{{- end -}}

{{- define "poolcoord.nodeLeaseRules" -}}
- apiGroups: ["coordination.k8s.io"]
  apiVersions: ["v1"]
  operations: ["CREATE", "UPDATE"]
  resources: ["leases"]
  scope: Namespaced
{{- end -}}

{{- define "poolcoord.nodeLeaseNamespaceSelector" -}}
matchLabels:
  kubernetes.io/metadata.name: kube-node-lease
{{- end -}}
