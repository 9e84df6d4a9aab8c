"""The lab's OAuth2 identity provider, built on Authlib's authorization server.

- client_credentials and refresh_token grants (RFC 6749); every refresh rotates:
  it issues a new refresh token and revokes the old one, as the incident's
  provider does after the snapshot.
- RFC 7662 introspection at /oauth/introspect and RFC 7009 revocation at /oauth/revoke.
- A file ``reject_next_refresh`` beside the SQLite file (lab only, ``labctl fault reject-refresh``): the next
  refresh grant is answered ``400 invalid_grant`` once, without revoking anything (a provider's transient
  failure), and the file is consumed.
- State in its own SQLite file, so it survives restarts (and a lab restore, which
  puts back the gateway's data but never the provider's).

The lab issues a refresh token with client_credentials too: the gateway's own
service session is created that way and refreshed like any other session.

Served by gunicorn: ``gunicorn 'lab.idp:create_app()'`` with VLLM_LAB_IDP_DB naming the SQLite file.
"""

from __future__ import annotations

import os
import time

from authlib.integrations.flask_oauth2 import AuthorizationServer
from authlib.integrations.sqla_oauth2 import (OAuth2ClientMixin, OAuth2TokenMixin, create_query_client_func,
                                              create_save_token_func)
from authlib.oauth2.rfc6749 import grants
from authlib.oauth2.rfc7009 import RevocationEndpoint
from authlib.oauth2.rfc7662 import IntrospectionEndpoint
from flask import Flask, jsonify, request
from sqlalchemy import Column, Integer, String, create_engine, select
from sqlalchemy.orm import DeclarativeBase, scoped_session, sessionmaker

ACCESS_TOKEN_SECONDS = 3600
# Client id -> secret; svc-vllm is the gateway, vllm-dr is the runbook's introspection client.
DEFAULT_CLIENTS = {'svc-vllm': 'svc-vllm-lab-secret', 'vllm-dr': 'vllm-dr-lab-secret'}


class Base(DeclarativeBase):
    pass


class Client(Base, OAuth2ClientMixin):
    __tablename__ = 'clients'
    id = Column(Integer, primary_key=True)


class Token(Base, OAuth2TokenMixin):
    __tablename__ = 'tokens'
    id = Column(Integer, primary_key=True)
    user_id = Column(String(64))

    def is_refresh_token_valid(self) -> bool:
        return not self.refresh_token_revoked_at and not self.access_token_revoked_at


class ServiceSubject:
    """The end user of a client_credentials session: the client itself."""

    def __init__(self, client_id: str):
        self.client_id = client_id

    def get_user_id(self) -> str:
        return self.client_id


class ClientCredentialsGrant(grants.ClientCredentialsGrant):
    """The lab's client_credentials also issues a refresh token (the gateway's service session)."""

    TOKEN_ENDPOINT_AUTH_METHODS = ['client_secret_basic', 'client_secret_post']

    def create_token_response(self):
        token = self.generate_token(scope=self.request.payload.scope, include_refresh_token=True)
        self.save_token(token)
        return 200, token, self.TOKEN_RESPONSE_HEADER


def create_app(db_path: str | None = None, clients: dict | None = None) -> Flask:
    db_path = db_path or os.environ['VLLM_LAB_IDP_DB']
    engine = create_engine(f'sqlite:///{db_path}', connect_args={'check_same_thread': False, 'timeout': 30})
    Base.metadata.create_all(engine)
    db = scoped_session(sessionmaker(bind=engine))
    _register_clients(db, clients or DEFAULT_CLIENTS)

    def find_token(token_string, token_type_hint):
        """The token by either of its strings; remembers which one matched."""
        kinds = ['refresh_token', 'access_token'] if token_type_hint != 'access_token' else ['access_token', 'refresh_token']
        for kind in kinds:
            token = db.execute(select(Token).where(getattr(Token, kind) == token_string)).scalar_one_or_none()
            if token is not None:
                token.found_as = kind
                return token
        return None

    class RefreshTokenGrant(grants.RefreshTokenGrant):
        TOKEN_ENDPOINT_AUTH_METHODS = ['client_secret_basic', 'client_secret_post']
        INCLUDE_NEW_REFRESH_TOKEN = True

        def authenticate_refresh_token(self, refresh_token):
            token = db.execute(select(Token).filter_by(refresh_token=refresh_token)).scalar_one_or_none()
            if token is not None and token.is_refresh_token_valid():
                return token
            return None

        def authenticate_user(self, refresh_token):
            # client_credentials sessions have no end user; the client stands for itself
            return ServiceSubject(refresh_token.client_id)

        def revoke_old_credential(self, refresh_token):
            now = int(time.time())
            refresh_token.refresh_token_revoked_at = now
            refresh_token.access_token_revoked_at = now
            db.add(refresh_token)
            db.commit()

    class Introspection(IntrospectionEndpoint):
        CLIENT_AUTH_METHODS = ['client_secret_basic']

        def query_token(self, token_string, token_type_hint):
            return find_token(token_string, token_type_hint)

        def create_introspection_payload(self, token):
            # A refresh token outlives its access token: judge it by its own revocation only.
            if token is None:
                return {'active': False}
            if token.found_as == 'refresh_token':
                if token.refresh_token_revoked_at:
                    return {'active': False}
            elif token.is_expired() or token.is_revoked():
                return {'active': False}
            return self.introspect_token(token)

        def introspect_token(self, token):
            return {'active': True, 'client_id': token.client_id, 'token_type': token.token_type,
                    'scope': token.get_scope(), 'iat': token.issued_at}

        def check_permission(self, token, client, request):
            return client.client_id == 'vllm-dr' or client.client_id == token.client_id

    class Revocation(RevocationEndpoint):
        CLIENT_AUTH_METHODS = ['client_secret_basic']

        def query_token(self, token_string, token_type_hint):
            return find_token(token_string, token_type_hint)

        def revoke_token(self, token, request):
            now = int(time.time())
            token.access_token_revoked_at = now
            token.refresh_token_revoked_at = now
            db.add(token)
            db.commit()

    app = Flask('vllm_dr_lab_idp')
    app.config['OAUTH2_TOKEN_EXPIRES_IN'] = {'client_credentials': ACCESS_TOKEN_SECONDS,
                                             'refresh_token': ACCESS_TOKEN_SECONDS}
    app.config['OAUTH2_REFRESH_TOKEN_GENERATOR'] = True
    server = AuthorizationServer(app, query_client=create_query_client_func(db, Client),
                                 save_token=create_save_token_func(db, Token))
    server.register_grant(ClientCredentialsGrant)
    server.register_grant(RefreshTokenGrant)
    server.register_endpoint(Introspection)
    server.register_endpoint(Revocation)

    reject_once = os.path.join(os.path.dirname(os.path.abspath(db_path)), 'reject_next_refresh')

    @app.post('/oauth/token')
    def issue_token():
        if request.form.get('grant_type') == 'refresh_token' and _consume(reject_once):
            return jsonify(error='invalid_grant', error_description='Refresh token is not active'), 400
        return server.create_token_response()

    @app.post('/oauth/introspect')
    def introspect():
        return server.create_endpoint_response(Introspection.ENDPOINT_NAME)

    @app.post('/oauth/revoke')
    def revoke():
        return server.create_endpoint_response(Revocation.ENDPOINT_NAME)

    @app.get('/healthz')
    def healthz():
        return jsonify(status='ok')

    @app.teardown_appcontext
    def close_session(_exc):
        db.remove()

    return app


def _consume(path: str) -> bool:
    """Whether the one-shot fault file was there; removing it is atomic, so one request of all the workers gets it."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True


def _register_clients(db, clients: dict) -> None:
    for client_id, secret in clients.items():
        if db.execute(select(Client).filter_by(client_id=client_id)).scalar_one_or_none() is not None:
            continue
        client = Client(client_id=client_id, client_secret=secret, client_id_issued_at=int(time.time()))
        client.set_client_metadata({'grant_types': ['client_credentials', 'refresh_token'],
                                    'token_endpoint_auth_method': 'client_secret_basic', 'scope': 'inference'})
        db.add(client)
    db.commit()
