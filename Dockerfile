# The dashboard as a container: docker build -t pipeline-planner . && docker run -p 8501:8501 pipeline-planner
# tests/test_server.py runs this file's CMD (on a free port) to check that the app starts and serves.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    DASHBOARD_WORKERS=auto \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

# Dependencies in their own layer: rebuilt only when requirements.txt changes.
COPY requirements.txt .
RUN pip install -r requirements.txt

# A user without privileges; the code stays owned by root, so the app cannot rewrite itself.
RUN useradd --create-home --uid 10001 app

COPY . .

USER app
EXPOSE 8501

# python instead of curl: the slim image has no curl, and the app already needs python.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; r = urllib.request.urlopen('http://127.0.0.1:8501/_stcore/health', timeout=4); sys.exit(0 if r.read().strip() == b'ok' else 1)"]

CMD ["streamlit", "run", "app.py", "--server.address=0.0.0.0", "--server.port=8501", "--server.headless=true"]
