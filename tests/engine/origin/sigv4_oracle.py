#!/usr/bin/python3
"""Recomputes an AWS Signature V4 with botocore, for tests/engine/origin/s3_origin_test.cc.

The test records the exact request libcurl sent to a loopback server and hands it here as JSON
on stdin:

  {"method": "GET", "target": "/bucket/key?list-type=2", "headers": [["Host", "..."], ...],
   "accessKeyId": "...", "secretAccessKey": "...", "sessionToken": "", "region": "us-east-1",
   "service": "s3"}

botocore (S3SigV4Auth, or SigV4Auth for another service) then signs the same request at the
same instant (the request's X-Amz-Date) with the same credentials, and this prints the
Authorization header it computes. botocore derives the canonical query string, the payload
hash, the host and the security token on its own; only the choice of which other headers to sign
is taken from the request (SigV4 lets the signer choose, as long as host and every x-amz-*
header are in). Exits 1 with a reason on stderr when the request breaks a rule of SigV4 for S3
that botocore would not notice by itself.
"""

import datetime
import json
import sys
from unittest import mock
from urllib.parse import quote, unquote

from botocore.auth import S3SigV4Auth, SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

# Headers botocore sets itself while signing: taken from the request they would not be checked.
DERIVED = {"host", "x-amz-date", "x-amz-content-sha256", "x-amz-security-token", "authorization"}


def fail(reason):
    print(reason, file=sys.stderr)
    sys.exit(1)


def header(headers, name):
    values = [v for n, v in headers if n.lower() == name]
    return values[0] if values else None


def main():
    request = json.load(sys.stdin)
    headers = request["headers"]
    authorization = header(headers, "authorization")
    if not authorization or "SignedHeaders=" not in authorization:
        fail("the request is not signed: no Authorization header with SignedHeaders")
    signed = authorization.split("SignedHeaders=")[1].split(",")[0].strip().split(";")
    for name, _ in headers:
        if name.lower().startswith("x-amz-") and name.lower() not in signed:
            fail(f"header {name} is sent but not signed")
    amz_date = header(headers, "x-amz-date")
    if not amz_date:
        fail("no X-Amz-Date header")

    path, _, query = request["target"].partition("?")
    # S3 does not normalise the path: it must already be in AWS's canonical encoding.
    if quote(unquote(path), safe="/~") != path:
        fail(f"path {path} is not in canonical URI encoding")
    params = []
    if query:
        for pair in query.split("&"):
            key, _, value = pair.partition("=")
            params.append((unquote(key), unquote(value)))

    aws = AWSRequest(
        method=request["method"],
        url="http://" + header(headers, "host") + path,
        headers={n: v for n, v in headers if n.lower() in signed and n.lower() not in DERIVED},
        params=params,
    )
    credentials = Credentials(
        request["accessKeyId"], request["secretAccessKey"], request.get("sessionToken") or None
    )
    service = request.get("service", "s3")
    signer_type = S3SigV4Auth if service == "s3" else SigV4Auth
    signer = signer_type(credentials, service, request["region"])

    instant = datetime.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ")

    class At(datetime.datetime):
        @classmethod
        def utcnow(cls):
            return instant

    with mock.patch("botocore.auth.datetime.datetime", At):
        signer.add_auth(aws)

    for name in ("x-amz-content-sha256", "x-amz-security-token"):
        expected = aws.headers.get(name)
        if expected is not None and header(headers, name) != expected:
            fail(f"{name} is {header(headers, name)!r}, botocore says {expected!r}")
    print(aws.headers["Authorization"])


if __name__ == "__main__":
    main()
