"""Input kube-apiserver would refuse or repair (issue 12), each with the input that
showed it: invalid UTF-8 is stored as U+FFFD, never raw (every later LIST stays
valid JSON); repeated JSON keys and unknown fields follow ?fieldValidation
(Strict: 400 on create/update, 422 on patch; Warn, the default: Warning headers;
Ignore: silence), the last repeated key winning; `"spec": null` on create is 422
spec: Required value; a create or update body must name its kind and our
apiVersion (400, 422 for another kind); a JSON type a field cannot take is 422
with the schema's wording, and every field error of a body comes in one 422. The
messages are kube-apiserver 1.32's for a CustomResourceDefinition with our
schema (recorded against one)."""
import http.client
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import BASE, GV, Server, expect, expect_status, run_cases, uniq  # noqa: E402

FFFD = "\ufffd"


def warnings(r):
    return [v for k, v in r.headers if k.lower() == "warning"]


def invalid_utf8_stored_as_replacement(s):
    c = s.admin()
    name = uniq("u8")
    # The bytes ff fe in an annotation value: stored repaired.
    body = (b'{"apiVersion":"coordination.pool/v1alpha1","kind":"PoolLease","metadata":{"name":"' +
            name.encode() + b'","annotations":{"x":"a\xff\xfeb"}},'
            b'"spec":{"leaseDurationSeconds":3}}')
    r = expect_status(c.request("POST", f"{BASE}/poolleases", body), 201)
    o = r.json()
    expect(o["metadata"]["annotations"]["x"] == "a" + FFFD + FFFD + "b", r.body)
    # In spec.holderIdentity, a node name, the repaired value (U+FFFD) is refused
    # as kube-apiserver refuses a node name, and so is a NUL.
    for holder in (b'h\xffi', b'h\\u0000i'):
        bad = (b'{"apiVersion":"coordination.pool/v1alpha1","kind":"PoolLease","metadata":'
               b'{"name":"' + uniq("u8").encode() + b'"},"spec":{"holderIdentity":"' + holder +
               b'","leaseDurationSeconds":3}}')
        r = expect_status(c.request("POST", f"{BASE}/poolleases", bad), 422, "Invalid")
        cause = r.json()["details"]["causes"][0]
        expect(cause["field"] == "spec.holderIdentity", r.body)
        expect("a lowercase RFC 1123 subdomain must consist of" in cause["message"], r.body)
    # Lone surrogate escapes too, and valid pairs stay.
    patch = b'{"metadata":{"annotations":{"y":"\\ud800x\\ud83d\\ude00"}}}'
    r = expect_status(c.request("PATCH", f"{BASE}/poolleases/{name}", patch,
                                "application/merge-patch+json"), 200)
    expect(r.json()["metadata"]["annotations"]["y"] == FFFD + "x\U0001F600", r.body)
    # Invalid bytes in a merge patch and a label value: refused by validation
    # after the repair, not stored raw.
    bad_label = b'{"metadata":{"labels":{"a":"\xff"}}}'
    expect_status(c.request("PATCH", f"{BASE}/poolleases/{name}", bad_label,
                            "application/merge-patch+json"), 422, "Invalid")
    # Every LIST decodes strictly as UTF-8 JSON.
    for path in (f"{BASE}/poolleases", f"{BASE}/poolleases/{name}"):
        conn = c.connect()
        conn.request("GET", path, headers={"Accept": "application/json"})
        data = conn.getresponse().read()
        conn.close()
        json.loads(data.decode("utf-8", "strict"))


def duplicate_and_unknown_fields_by_field_validation(s):
    c = s.admin()
    name = uniq("dup")
    body = ('{"apiVersion":"coordination.pool/v1alpha1","kind":"PoolLease","metadata":{"name":"%s"},'
            '"zzz":1,"spec":{"leaseDurationSeconds":3,"foo":1,"leaseDurationSeconds":4},"bar":2}' % name)
    r = expect_status(c.request("POST", f"{BASE}/poolleases?fieldValidation=Strict", body), 400, "BadRequest")
    expect(r.json()["message"] == 'PoolLease in version "v1alpha1" cannot be handled as a PoolLease: strict '
                                  'decoding error: duplicate field "spec.leaseDurationSeconds", unknown field '
                                  '"bar", unknown field "spec.foo", unknown field "zzz"', r.body)
    r = expect_status(c.request("POST", f"{BASE}/poolleases?dryRun=All", body), 201)  # Warn by default
    expect(warnings(r) == ['299 - "duplicate field \\"spec.leaseDurationSeconds\\""',
                           '299 - "unknown field \\"bar\\""', '299 - "unknown field \\"spec.foo\\""',
                           '299 - "unknown field \\"zzz\\""'], warnings(r))
    r = expect_status(c.request("POST", f"{BASE}/poolleases?fieldValidation=Ignore", body), 201)
    expect(warnings(r) == [], warnings(r))
    expect(r.json()["spec"]["leaseDurationSeconds"] == 4, "the last repeated key wins")
    # A repeated object: the last one whole, not a merge of both.
    body2 = ('{"apiVersion":"coordination.pool/v1alpha1","kind":"PoolLease","metadata":{"name":"%s"},'
             '"spec":{"holderIdentity":"x","leaseDurationSeconds":3},"spec":{"leaseDurationSeconds":5}}' % uniq("dup"))
    r = expect_status(c.request("POST", f"{BASE}/poolleases?fieldValidation=Ignore", body2), 201)
    expect(r.json()["spec"] == {"leaseDurationSeconds": 5}, r.body)
    # PUT answers as create does.
    o = r.json()
    put = json.dumps(o)[:-1] + ',"spec":{"leaseDurationSeconds":6}}'
    r = expect_status(c.request("PUT", f"{BASE}/poolleases/{o['metadata']['name']}?fieldValidation=Strict", put),
                      400, "BadRequest")
    expect('duplicate field \\"spec\\"' in r.body, r.body)
    # Patches: 422 against "patch" under Strict, warnings under Warn.
    url = f"{BASE}/poolleases/{name}"
    mp = '{"spec":{"leaseDurationSeconds":3,"foo":1,"leaseDurationSeconds":4}}'
    r = expect_status(c.request("PATCH", url + "?fieldValidation=Strict", mp, "application/merge-patch+json"),
                      422, "Invalid")
    msg = r.json()["message"]
    expect(msg.startswith(' "" is invalid: patch: Invalid value: "{') and
           msg.endswith('": strict decoding error: duplicate field "spec.leaseDurationSeconds", '
                        'unknown field "spec.foo"'), msg)
    r = expect_status(c.request("PATCH", url, mp, "application/merge-patch+json"), 200)
    expect(warnings(r) == ['299 - "duplicate field \\"spec.leaseDurationSeconds\\""',
                           '299 - "unknown field \\"spec.foo\\""'], warnings(r))
    jp = '[{"op":"replace","path":"/spec/leaseDurationSeconds","value":5,"value":6}]'
    r = expect_status(c.request("PATCH", url + "?fieldValidation=Strict", jp, "application/json-patch+json"),
                      422, "Invalid")
    expect(r.json()["message"].endswith('strict decoding error: json patch duplicate field "[0].value"'), r.body)
    r = expect_status(c.request("PATCH", url, jp, "application/json-patch+json"), 200)
    expect(r.json()["spec"]["leaseDurationSeconds"] == 6, r.body)


def many_fields_answered_whole_and_warnings_capped(s):
    # The input that showed it: 16,000 unknown fields under Warn took the server
    # 68 s (every key compared with every other) and the answer broke off inside
    # 7,657 Warning lines (365 KB). Now: a whole answer, each warning once, at
    # most 4,096 characters of warning text in all, each cut to 256, as
    # k8s.io/apiserver's warning recorder sends them; Strict names them all.
    http.client._MAXHEADERS = 1000  # ~160 Warning lines fit in 4,096 characters; Python reads 100
    c = s.admin()
    fields = ",".join('"u%d":%d' % (i, i) for i in range(16000))
    body = ('{"apiVersion":"coordination.pool/v1alpha1","kind":"PoolLease","metadata":{"name":"%s"},'
            '"spec":{"leaseDurationSeconds":3,%s}}' % (uniq("many"), fields))
    r = expect_status(c.request("POST", f"{BASE}/poolleases?dryRun=All", body), 201)
    w = warnings(r)
    texts = [json.loads(v[len("299 - "):]) for v in w]
    expect(0 < len(w) < 200, f"{len(w)} Warning headers")
    expect(sum(len(t) for t in texts) <= 4096, sum(len(t) for t in texts))
    expect(texts[0] == 'unknown field "spec.u0"' and len(set(texts)) == len(texts), texts[:3])
    expect(r.json()["spec"]["leaseDurationSeconds"] == 3, r.body[:200])
    r = expect_status(c.request("POST", f"{BASE}/poolleases?fieldValidation=Strict&dryRun=All", body),
                      400, "BadRequest")
    expect('unknown field "spec.u15999"' in r.json()["message"], r.body[-200:])
    # 8,000 repetitions of one key: the last wins, each repetition reported once.
    dup = ",".join('"leaseDurationSeconds":%d' % (i % 300 + 1) for i in range(8000))
    body = ('{"apiVersion":"coordination.pool/v1alpha1","kind":"PoolLease","metadata":{"name":"%s"},'
            '"spec":{%s}}' % (uniq("dup"), dup))
    r = expect_status(c.request("POST", f"{BASE}/poolleases?dryRun=All", body), 201)
    expect(r.json()["spec"]["leaseDurationSeconds"] == 200, r.body[:200])  # 7999 % 300 + 1
    expect(warnings(r) == ['299 - "duplicate field \\"spec.leaseDurationSeconds\\""'], warnings(r))


def kubectl_create_is_strict(s):
    # kubectl (1.27+) asks for fieldValidation=Strict: an unknown field fails it.
    name = uniq("k")
    doc = {"apiVersion": GV, "kind": "PoolLease", "metadata": {"name": name},
           "spec": {"leaseDurationSeconds": 3, "bogus": 1}}
    r = s.kubectl("create", "-f", "-", stdin=json.dumps(doc))
    expect(r.returncode != 0 and 'unknown field "spec.bogus"' in r.stderr, r.stderr)


def spec_is_required(s):
    c = s.admin()
    for kind, k in (("poolleases", "PoolLease"), ("delegatedleases", "DelegatedLease")):
        name = uniq("nospec")
        for spec in ("null", None):
            body = {"apiVersion": GV, "kind": k, "metadata": {"name": name}}
            text = json.dumps(body)[:-1] + (',"spec":null}' if spec else "}")
            r = expect_status(c.request("POST", f"{BASE}/{kind}", text), 422, "Invalid")
            st = r.json()
            # spec first; a DelegatedLease's own rule on its annotation with it
            # (every field error in one answer).
            expect(st["details"]["causes"][0] == {"reason": "FieldValueRequired", "message": "Required value",
                                                  "field": "spec"}, r.body)
            expect([x["field"] for x in st["details"]["causes"]] ==
                   (["spec"] if k == "PoolLease" else ["spec", "metadata.annotations"]), r.body)
        expect_status(c.request("GET", f"{BASE}/{kind}/{name}"), 404)
    # An empty spec lacks the duration, as the schema requires it.
    name = uniq("nodur")
    r = expect_status(c.request("POST", f"{BASE}/poolleases",
                                {"apiVersion": GV, "kind": "PoolLease", "metadata": {"name": name}, "spec": {}}),
                      422, "Invalid")
    expect(r.json()["details"]["causes"][0]["field"] == "spec.leaseDurationSeconds", r.body)
    # Removing spec later is refused the same way.
    name = uniq("rm")
    expect_status(c.request("POST", f"{BASE}/poolleases",
                            {"apiVersion": GV, "kind": "PoolLease", "metadata": {"name": name},
                             "spec": {"leaseDurationSeconds": 3}}), 201)
    r = expect_status(c.request("PATCH", f"{BASE}/poolleases/{name}", '{"spec":null}',
                                "application/merge-patch+json"), 422, "Invalid")
    expect(r.json()["details"]["causes"][0]["field"] == "spec", r.body)


def body_must_name_kind_and_api_version(s):
    # The input that showed it: a create without kind and apiVersion was stored.
    c = s.admin()
    name = uniq("tm")
    bare = '{"metadata":{"name":"%s"},"spec":{"leaseDurationSeconds":3}}' % name
    r = expect_status(c.request("POST", f"{BASE}/poolleases", bare), 400, "BadRequest")
    expect(r.json()["message"] ==
           "the object provided is unrecognized (must be of type PoolLease): Object 'Kind' is missing in "
           "'%s' (%s ...)" % (bare, bare[:30]), r.body)
    expect_status(c.request("GET", f"{BASE}/poolleases/{name}"), 404)
    r = expect_status(c.request("POST", f"{BASE}/poolleases", '{"kind":"PoolLease",' + bare[1:]), 400, "BadRequest")
    expect(r.json()["message"] == "the API version in the data () does not match the expected API version "
                                  "(coordination.pool/v1alpha1)", r.body)
    r = expect_status(c.request("POST", f"{BASE}/poolleases", '{"apiVersion":"v1","kind":"PoolLease",' + bare[1:]),
                      400, "BadRequest")
    expect(r.json()["message"] == "the API version in the data (v1) does not match the expected API version "
                                  "(coordination.pool/v1alpha1)", r.body)
    r = expect_status(c.request("POST", f"{BASE}/poolleases", "[]"), 400, "BadRequest")
    expect(r.json()["message"].startswith("the object provided is unrecognized (must be of type PoolLease): "
                                          "couldn't get version/kind; json parse error: json: cannot unmarshal "
                                          "array into Go value of type struct {") and
           r.json()["message"].endswith("(5b5d)"), r.body)
    r = expect_status(c.request("POST", f"{BASE}/poolleases", ""), 400, "BadRequest")
    expect(r.json()["message"] == "the object provided is unrecognized (must be of type PoolLease): couldn't get "
                                  "version/kind; json parse error: unexpected end of JSON input (<empty>)", r.body)
    # Another kind of ours: 422 of that kind, the kind alone.
    other = '{"apiVersion":"%s","kind":"DelegatedLease",%s' % (GV, bare[1:].replace('"leaseDurationSeconds":3',
                                                                                     '"leaseDurationSeconds":"x"'))
    r = expect_status(c.request("POST", f"{BASE}/poolleases", other), 422, "Invalid")
    st = r.json()
    expect(st["message"] == f'DelegatedLease.coordination.pool "{name}" is invalid: kind: Invalid value: '
                            '"DelegatedLease": must be PoolLease', r.body)
    expect(st["details"]["kind"] == "DelegatedLease", r.body)
    # PUT answers the same; a good create first.
    good = {"apiVersion": GV, "kind": "PoolLease", "metadata": {"name": name}, "spec": {"leaseDurationSeconds": 3}}
    expect_status(c.request("POST", f"{BASE}/poolleases", good), 201)
    for path in (f"{BASE}/poolleases/{name}", f"{BASE}/poolleases/{name}/status"):
        r = expect_status(c.request("PUT", path, bare), 400, "BadRequest")
        expect("Object 'Kind' is missing in" in r.json()["message"], r.body)
    # Patches merge onto the stored object, whose kind and apiVersion they keep,
    # unless they remove or change them.
    url = f"{BASE}/poolleases/{name}"
    expect_status(c.request("PATCH", url, '{"spec":{"leaseDurationSeconds":4}}', "application/merge-patch+json"), 200)
    r = expect_status(c.request("PATCH", url, '{"kind":"DelegatedLease"}', "application/merge-patch+json"),
                      422, "Invalid")
    expect(r.json()["details"]["causes"] == [{"reason": "FieldValueInvalid", "field": "kind",
                                              "message": 'Invalid value: "DelegatedLease": must be PoolLease'}],
           r.body)
    r = expect_status(c.request("PATCH", url, '{"kind":null}', "application/merge-patch+json"), 422, "Invalid")
    expect(r.json()["message"].startswith(' "" is invalid: patch: Invalid value: "{') and
           "Object 'Kind' is missing in '{" in r.json()["message"], r.body)
    r = expect_status(c.request("PATCH", url, '[{"op":"replace","path":"/apiVersion","value":"x/v1"}]',
                                "application/json-patch+json"), 422, "Invalid")
    expect(r.json()["message"] == f'PoolLease.x "{name}" is invalid: apiVersion: Invalid value: "x/v1": must be '
                                  'coordination.pool/v1alpha1', r.body)


def type_errors_are_invalid_by_json_path(s):
    # The input that showed it: "x" for an integer was a 400 naming our C++ type
    # (LeaseSpec.spec.leaseDurationSeconds of type int32).
    c = s.admin()
    name = uniq("te")
    body = ('{"apiVersion":"%s","kind":"PoolLease","metadata":{"name":"%s"},"spec":{"leaseDurationSeconds":"x"}}'
            % (GV, name))
    r = expect_status(c.request("POST", f"{BASE}/poolleases", body), 422, "Invalid")
    expect(r.json() == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": f'PoolLease.coordination.pool "{name}" is invalid: spec.leaseDurationSeconds: Invalid value: '
                   '"string": spec.leaseDurationSeconds in body must be of type integer: "string"',
        "reason": "Invalid",
        "details": {"name": name, "group": "coordination.pool", "kind": "PoolLease",
                    "causes": [{"reason": "FieldValueTypeInvalid", "field": "spec.leaseDurationSeconds",
                                "message": 'Invalid value: "string": spec.leaseDurationSeconds in body must be '
                                           'of type integer: "string"'}]},
        "code": 422}, r.body)
    # ObjectMeta is decoded as encoding/json decodes it: 400, named by ObjectMeta's fields.
    r = expect_status(c.request("POST", f"{BASE}/poolleases", body.replace('"name"', '"labels":{"a":1},"name"')),
                      400, "BadRequest")
    expect(r.json()["message"] == 'PoolLease in version "v1alpha1" cannot be handled as a PoolLease: json: cannot '
                                  'unmarshal number into Go struct field ObjectMeta.labels of type string', r.body)
    # Integral numbers are integers, as the schema takes them.
    r = expect_status(c.request("POST", f"{BASE}/poolleases", body.replace('"x"', "3.0")), 201)
    expect(r.json()["spec"]["leaseDurationSeconds"] == 3, r.body)
    # Status a create or an update of the main resource resets is not judged;
    # /status judges it and names its fields from there, as kube-apiserver does.
    url = f"{BASE}/poolleases/{name}"
    expect_status(c.request("PATCH", url, '{"status":{"expired":"no"}}', "application/merge-patch+json"), 200)
    r = expect_status(c.request("PATCH", url + "/status", '{"status":{"observedTime":"bad"}}',
                                "application/merge-patch+json"), 422, "Invalid")
    expect(r.json()["details"]["causes"] == [{"reason": "FieldValueTypeInvalid", "field": "status.observedTime",
                                              "message": 'Invalid value: "bad": observedTime in body must be of '
                                                         'type date-time: "bad"'}], r.body)
    # A merge patch: the same 422 on the patched object.
    r = expect_status(c.request("PATCH", url, '{"spec":{"leaseTransitions":1.5}}', "application/merge-patch+json"),
                      422, "Invalid")
    expect(r.json()["details"]["causes"][0]["message"] ==
           'Invalid value: "number": spec.leaseTransitions in body must be of type integer: "number"', r.body)


def every_field_error_in_one_answer(s):
    # The input that showed it: renewTime "yesterday" hid the other field errors
    # of the same body (and a type error hid the bad time).
    c = s.admin()
    name = uniq("All")  # not a DNS-1123 subdomain either
    body = ('{"apiVersion":"%s","kind":"PoolLease","metadata":{"name":"%s"},"spec":{"leaseDurationSeconds":0,'
            '"renewTime":"yesterday","holderIdentity":5,"leaseTransitions":-1}}' % (GV, name))
    r = expect_status(c.request("POST", f"{BASE}/poolleases", body), 422, "Invalid")
    fields = [(x["field"], x["reason"]) for x in r.json()["details"]["causes"]]
    expect(fields == [("metadata.name", "FieldValueInvalid"), ("spec.renewTime", "FieldValueTypeInvalid"),
                      ("spec.holderIdentity", "FieldValueTypeInvalid")], fields)
    name = name.lower()
    r = expect_status(c.request("POST", f"{BASE}/poolleases", body.replace("All", "all")), 422, "Invalid")
    fields = [x["field"] for x in r.json()["details"]["causes"]]
    expect(fields == ["spec.renewTime", "spec.holderIdentity", "spec.leaseDurationSeconds",
                      "spec.leaseTransitions"], r.body)
    # No name and no spec: both (kube-apiserver: [metadata.name: Required value:
    # name or generateName is required, spec: Required value]).
    r = expect_status(c.request("POST", f"{BASE}/poolleases", '{"kind":"PoolLease","apiVersion":"%s"}' % GV),
                      422, "Invalid")
    expect(r.json()["message"] == 'PoolLease.coordination.pool "" is invalid: [metadata.name: Required value: name '
                                  'or generateName is required, spec: Required value]', r.body)
    # An update: the same, with the kind's checks of the new object.
    expect_status(c.request("POST", f"{BASE}/poolleases",
                            {"apiVersion": GV, "kind": "PoolLease", "metadata": {"name": name},
                             "spec": {"leaseDurationSeconds": 3}}), 201)
    r = expect_status(c.request("PATCH", f"{BASE}/poolleases/{name}",
                                '{"spec":{"leaseDurationSeconds":0,"acquireTime":"soon"}}',
                                "application/merge-patch+json"), 422, "Invalid")
    fields = [x["field"] for x in r.json()["details"]["causes"]]
    expect(fields == ["spec.acquireTime", "spec.leaseDurationSeconds"], r.body)


def yaml_in_and_out(s):
    # The input that showed it: a YAML body got 415 and Accept: application/yaml
    # 406; kube-apiserver takes and serves YAML for a custom resource.
    c = s.admin()
    name = uniq("yaml")
    doc = ("apiVersion: coordination.pool/v1alpha1\nkind: PoolLease\nmetadata:\n  name: %s\n"
           "  labels: {b: '1'}\nspec:\n  leaseDurationSeconds: 3\n" % name)
    r = expect_status(c.request("POST", f"{BASE}/poolleases", doc, "application/yaml"), 201)
    expect(r.json()["metadata"]["labels"] == {"b": "1"}, r.body)
    r = expect_status(c.request("GET", f"{BASE}/poolleases/{name}", accept="application/yaml"), 200)
    expect(r.header("content-type") == "application/yaml", r.headers)
    lines = r.body.splitlines()
    expect(lines[:2] == ["apiVersion: coordination.pool/v1alpha1", "kind: PoolLease"] and
           '    b: "1"' in lines and "  leaseDurationSeconds: 3" in lines, r.body)
    r = expect_status(c.request("GET", f"{BASE}/poolleases", accept="application/yaml"), 200)
    expect(r.body.startswith("apiVersion: coordination.pool/v1alpha1\nitems:\n"), r.body[:200])
    # Errors too, as Status in YAML.
    r = c.request("GET", f"{BASE}/poolleases/{name}-none", accept="application/yaml")
    expect(r.status == 404 and r.body.startswith("apiVersion: v1\ncode: 404\n") and "reason: NotFound" in r.body, r.body)
    # A YAML body is judged as a JSON one: repeated keys by fieldValidation, as go-yaml words them.
    dup = doc.replace("leaseDurationSeconds: 3", "leaseDurationSeconds: 3\n  leaseDurationSeconds: 4")
    r = expect_status(c.request("POST", f"{BASE}/poolleases?fieldValidation=Strict", dup.replace(name, name + "-d"),
                                "application/yaml"), 400, "BadRequest")
    expect(r.json()["message"] == 'PoolLease in version "v1alpha1" cannot be handled as a PoolLease: strict '
                                  'decoding error: yaml: unmarshal errors:\n  line 8: key "leaseDurationSeconds" '
                                  'already set in map', r.body)
    rv = expect_status(c.request("GET", f"{BASE}/poolleases/{name}"), 200).json()["metadata"]["resourceVersion"]
    put = dup.replace("  labels:", "  resourceVersion: '%s'\n  labels:" % rv)  # one line more
    r = expect_status(c.request("PUT", f"{BASE}/poolleases/{name}", put, "application/yaml"), 200)
    expect(warnings(r) == ['299 - "line 9: key \\"leaseDurationSeconds\\" already set in map"'], warnings(r))
    expect(r.json()["spec"]["leaseDurationSeconds"] == 4, r.body)
    expect_status(c.request("POST", f"{BASE}/poolleases", "x", "text/plain"), 415, "UnsupportedMediaType")


CASES = [invalid_utf8_stored_as_replacement, duplicate_and_unknown_fields_by_field_validation,
         many_fields_answered_whole_and_warnings_capped,
         kubectl_create_is_strict, spec_is_required, body_must_name_kind_and_api_version,
         type_errors_are_invalid_by_json_path, every_field_error_in_one_answer, yaml_in_and_out]

if __name__ == "__main__":
    sys.exit(run_cases(CASES, lambda b: Server(b)))
