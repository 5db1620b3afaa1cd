"""The benchmarks' HTTP client: JSON calls with a bearer token, returning the envelope whether the
status is a success or a refusal."""
import json
import urllib.error
import urllib.request


def client(base, token):
    def call(method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(base + path, data=data, method=method)
        req.add_header("Authorization", "Bearer " + token)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req) as resp:
                return json.load(resp)
        except urllib.error.HTTPError as e:
            return json.load(e)

    return call
