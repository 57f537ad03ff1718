# tms: the table management service for Apache Hudi.
#   docker build -t tms .
#   docker run -p 9091:9091 -e TMS_DATABASE_URL=postgresql://user:pass@db:5432/tms tms
# Without TMS_DATABASE_URL the container runs an embedded PostgreSQL under TMS_DATA_DIR
# (fine for a try-out; use a real server and a volume for anything else).
FROM python:3.11-slim

# Spark jobs (spark-submit from the installed PySpark) need a Java runtime; procps gives
# Spark's launch scripts `ps`.
RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
    && rm -rf /var/lib/apt/lists/*

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install .

# Migrations are read from ./migrations (the working directory) at every start.
COPY alembic.ini ./
COPY migrations ./migrations
COPY conf ./conf

RUN useradd --system --create-home --uid 10001 tms \
    && mkdir -p /var/lib/tms \
    && chown tms /var/lib/tms
USER tms

ENV TMS_HOST=0.0.0.0 \
    TMS_PORT=9091 \
    TMS_DATA_DIR=/var/lib/tms
VOLUME ["/var/lib/tms"]
EXPOSE 9091

HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:9091/readyz', timeout=4)"]

CMD ["tms", "serve", "--host", "0.0.0.0"]
