"""Jinja2 templates of every text format fabroute exports."""
