"""The HTTP edge: settings, the Flask application and the gunicorn configuration."""
