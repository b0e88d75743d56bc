package bucket

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
)

// S3Options configure the client. Credentials and region come the standard
// AWS way: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN,
// AWS_PROFILE and ~/.aws/{config,credentials}, AWS_REGION.
type S3Options struct {
	// Endpoint is the server of a non-AWS S3-compatible store
	// (http://127.0.0.1:7070); addressing is then path-style. Empty: AWS
	// (or AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL).
	Endpoint string
	// PathStyle forces path-style addressing on AWS too.
	PathStyle bool
	// MaxAttempts bounds the client's own retries of one request (0: 3).
	// Callers that must not lose work retry around it with their own
	// back-off.
	MaxAttempts int
}

// S3 is a Bucket on an S3-compatible server.
type S3 struct {
	url    URL
	client *s3.Client
}

// OpenS3 makes a client for the bucket and prefix of url (s3://B/P). It
// does not contact the server: Check does.
func OpenS3(ctx context.Context, url string, o S3Options) (*S3, error) {
	u, err := ParseURL(url)
	if err != nil {
		return nil, err
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("remote %s: AWS configuration: %w", u, err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	attempts := o.MaxAttempts
	if attempts <= 0 {
		attempts = 3
	}
	endpoint := o.Endpoint
	if endpoint == "" {
		endpoint = os.Getenv("CKPTFS_S3_ENDPOINT")
	}
	client := s3.NewFromConfig(cfg, func(so *s3.Options) {
		so.RetryMaxAttempts = attempts
		if endpoint != "" {
			so.BaseEndpoint = aws.String(endpoint)
			so.UsePathStyle = true
		}
		if o.PathStyle {
			so.UsePathStyle = true
		}
		// Only what the server needs: the SDK's default of computing
		// CRC32 trailers on every PutObject is not understood by every
		// S3-compatible server.
		so.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		so.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	return &S3{url: u, client: client}, nil
}

func (b *S3) String() string { return b.url.String() }

// classify wraps err with ErrNotFound or ErrDenied where the server said so.
func classify(err error) error {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "NoSuchKey", "NotFound":
			return fmt.Errorf("%w: %w", ErrNotFound, err)
		case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "Forbidden", "AllAccessDisabled", "NoSuchBucket":
			return fmt.Errorf("%w: %w", ErrDenied, err)
		}
	}
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) {
		switch re.HTTPStatusCode() {
		case http.StatusNotFound:
			return fmt.Errorf("%w: %w", ErrNotFound, err)
		case http.StatusForbidden:
			return fmt.Errorf("%w: %w", ErrDenied, err)
		}
	}
	return err
}

func (b *S3) Put(ctx context.Context, key string, body io.ReadSeeker, size int64, sum string) error {
	var opts []func(*s3.Options)
	if sum != "" {
		opts = append(opts, s3.WithAPIOptions(withPayloadHash(sum)))
	}
	_, err := b.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(b.url.Bucket), Key: aws.String(b.url.key(key)),
		Body: body, ContentLength: aws.Int64(size)}, opts...)
	if err != nil {
		return fmt.Errorf("put %s/%s: %w", b.url, key, classify(err))
	}
	return nil
}

// withPayloadHash signs a request with a payload hash the caller knows,
// so that the signer does not read the body to compute it; the server
// still checks the body against it.
func withPayloadHash(sum string) func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		return stack.Finalize.Insert(middleware.FinalizeMiddlewareFunc("ckptfsPayloadHash",
			func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				return next.HandleFinalize(v4.SetPayloadHash(ctx, sum), in)
			}), "ComputePayloadHash", middleware.Before)
	}
}

func (b *S3) Get(ctx context.Context, key string) ([]byte, error) {
	out, err := b.client.GetObject(ctx, &s3.GetObjectInput{
		Bucket: aws.String(b.url.Bucket), Key: aws.String(b.url.key(key))})
	if err != nil {
		return nil, fmt.Errorf("get %s/%s: %w", b.url, key, classify(err))
	}
	defer out.Body.Close()
	data, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, fmt.Errorf("get %s/%s: %w", b.url, key, err)
	}
	return data, nil
}

func (b *S3) ReadAt(ctx context.Context, key string, p []byte, off int64) error {
	if len(p) == 0 {
		return nil
	}
	out, err := b.client.GetObject(ctx, &s3.GetObjectInput{
		Bucket: aws.String(b.url.Bucket), Key: aws.String(b.url.key(key)),
		Range: aws.String(fmt.Sprintf("bytes=%d-%d", off, off+int64(len(p))-1))})
	if err != nil {
		return fmt.Errorf("read %s/%s [%d,+%d): %w", b.url, key, off, len(p), classify(err))
	}
	defer out.Body.Close()
	if _, err := io.ReadFull(out.Body, p); err != nil {
		return fmt.Errorf("read %s/%s [%d,+%d): %w", b.url, key, off, len(p), err)
	}
	return nil
}

func (b *S3) Exists(ctx context.Context, key string) (bool, error) {
	_, err := b.client.HeadObject(ctx, &s3.HeadObjectInput{
		Bucket: aws.String(b.url.Bucket), Key: aws.String(b.url.key(key))})
	if err == nil {
		return true, nil
	}
	if err = classify(err); errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return false, fmt.Errorf("head %s/%s: %w", b.url, key, err)
}

func (b *S3) List(ctx context.Context, prefix string) ([]string, error) {
	full := b.url.key(prefix)
	p := s3.NewListObjectsV2Paginator(b.client, &s3.ListObjectsV2Input{
		Bucket: aws.String(b.url.Bucket), Prefix: aws.String(full)})
	var keys []string
	strip := len(full) - len(prefix)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list %s/%s: %w", b.url, prefix, classify(err))
		}
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key)[strip:])
		}
	}
	return keys, nil
}

func (b *S3) Delete(ctx context.Context, key string) error {
	_, err := b.client.DeleteObject(ctx, &s3.DeleteObjectInput{
		Bucket: aws.String(b.url.Bucket), Key: aws.String(b.url.key(key))})
	if err != nil {
		if err = classify(err); errors.Is(err, ErrNotFound) {
			return nil
		}
		return fmt.Errorf("delete %s/%s: %w", b.url, key, err)
	}
	return nil
}

func (b *S3) Check(ctx context.Context) error {
	_, err := b.client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{
		Bucket: aws.String(b.url.Bucket), Prefix: aws.String(b.url.key("")), MaxKeys: aws.Int32(1)})
	if err != nil {
		var nb *types.NoSuchBucket
		if errors.As(err, &nb) {
			return fmt.Errorf("remote %s: the bucket does not exist: %w", b.url, ErrDenied)
		}
		return fmt.Errorf("remote %s: %w", b.url, classify(err))
	}
	return nil
}

// CreateBucket creates the bucket (tests and first use against a private
// server); an existing bucket owned by the caller is not an error.
func (b *S3) CreateBucket(ctx context.Context) error {
	_, err := b.client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(b.url.Bucket)})
	var owned *types.BucketAlreadyOwnedByYou
	if err != nil && !errors.As(err, &owned) {
		return fmt.Errorf("create bucket %s: %w", b.url.Bucket, classify(err))
	}
	return nil
}
