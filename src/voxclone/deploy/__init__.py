"""Ways to run voxclone on a distributed engine (``voxclone.deploy.ray``: Ray Serve).

Outside the layers, like ``api/server.py``: these modules only host the app
that ``voxclone.api.app.create_app`` builds. Nothing here is imported by the
service itself, so Ray stays an optional dependency.
"""
