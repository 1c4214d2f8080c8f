module fakekube

go 1.22
